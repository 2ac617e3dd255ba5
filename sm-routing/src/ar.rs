//! Adaptive-routing hints: output formats.
//!
//! Engines compute, when [`crate::Options::adaptive`] is set, per switch a list of port
//! groups and per LID the group of equal-cost output ports that obey the engine's deadlock
//! rule ([`crate::routes::SwitchAr`]): for `minhop` every port on a shortest path, for
//! `updn` and `ftree` every shortest port whose next switch keeps every packet that can be
//! at this switch for this LID on an `up* down*` path. The static port of the LID's
//! forwarding table entry is always in its group; a LID with a single legal port has no
//! group.
//!
//! # Text format
//!
//! ```text
//! # ibsm adaptive-routing hints, engine updn
//! Switch 0x0002000100000000 ('leaf 0')
//! group 0: 19 20 21 22
//! group 1: 23 24
//! 0x0013 19 0
//! 0x0014 23 1
//! ```
//!
//! One section per switch that has groups, in snapshot order: a `Switch <GUID> ('<node
//! description>')` line, then `group <id>: <ports>` lines (ids from 0, ports ascending,
//! decimal), then one `<LID> <static port> <group id>` line per LID that has a group (LID in
//! hexadecimal as in `opensm-lfts.dump`, port and group in decimal), ascending LIDs. LIDs
//! without a line have no alternative port. Lines starting with `#` are comments.
//!
//! # JSON
//!
//! [`ArDump`] serialises with serde: `{"engine": .., "switches": [{"guid": "0x..",
//! "description": .., "groups": [[ports], ..], "lids": [{"lid": n, "port": p, "group": g},
//! ..]}, ..]}`.

use std::io::{self, Write};

use sm_mad::Guid;

use crate::routes::Routes;
use crate::topo::{SwIdx, Topo};

/// Writes the text format (nothing for routes without hints).
pub fn write_ar(routes: &Routes, topo: &Topo<'_>, out: &mut dyn Write) -> io::Result<()> {
    let Some(ar) = &routes.ar else {
        return Ok(());
    };
    let mut w = io::BufWriter::new(out);
    writeln!(w, "# ibsm adaptive-routing hints, engine {}", routes.engine)?;
    for (s, sw) in ar.iter().enumerate() {
        if sw.groups.is_empty() {
            continue;
        }
        let node = topo.fabric.node(topo.switches[s]);
        writeln!(w, "Switch {} ('{}')", node.guid, node.description)?;
        for (g, ports) in sw.groups.iter().enumerate() {
            write!(w, "group {g}:")?;
            for p in ports {
                write!(w, " {p}")?;
            }
            writeln!(w)?;
        }
        for (lid, &g) in sw.lid_group.iter().enumerate() {
            if g == u16::MAX {
                continue;
            }
            let port = routes.lft[s].get(lid).copied().unwrap_or(0);
            writeln!(w, "{lid:#06x} {port} {g}")?;
        }
    }
    w.flush()
}

/// The hints of one routing run, for serde.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ArDump {
    pub engine: &'static str,
    pub switches: Vec<ArSwitch>,
}

/// One switch's hints.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ArSwitch {
    pub guid: Guid,
    pub description: String,
    pub groups: Vec<Vec<u8>>,
    pub lids: Vec<ArLid>,
}

/// One LID with alternatives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ArLid {
    pub lid: u16,
    pub port: u8,
    pub group: u16,
}

impl ArDump {
    /// Collects the hints of `routes` (switches without groups are left out).
    pub fn new(routes: &Routes, topo: &Topo<'_>) -> ArDump {
        let mut switches = Vec::new();
        for (s, sw) in routes.ar.iter().flatten().enumerate() {
            if sw.groups.is_empty() {
                continue;
            }
            let node = topo.fabric.node(topo.switches[s]);
            let lids = sw
                .lid_group
                .iter()
                .enumerate()
                .filter(|(_, g)| **g != u16::MAX)
                .map(|(lid, &group)| ArLid {
                    lid: lid as u16,
                    port: routes
                        .port(SwIdx(s as u32), sm_mad::Lid(lid as u16))
                        .unwrap_or(0),
                    group,
                })
                .collect();
            switches.push(ArSwitch {
                guid: node.guid,
                description: node.description.clone(),
                groups: sw.groups.clone(),
                lids,
            });
        }
        ArDump {
            engine: routes.engine,
            switches,
        }
    }
}
