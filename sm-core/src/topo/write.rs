//! The writer: ibnetdiscover's text format, which ibsim also reads.

use std::io::{self, Write};

use crate::fabric::{Fabric, NodeIdx, NodeKind, Port, width};

/// What to put in the output beyond the fabric's structure.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// A comment line for the file header (e.g. how it was generated).
    pub comment: Option<String>,
}

fn node_id(f: &Fabric, n: NodeIdx) -> String {
    let node = f.node(n);
    let prefix = match node.kind {
        NodeKind::Switch => 'S',
        NodeKind::Ca => 'H',
        NodeKind::Router => 'R',
    };
    format!("{prefix}-{:016x}", node.guid.0)
}

fn clean(desc: &str) -> String {
    desc.chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect()
}

fn rate(p: &Port) -> String {
    format!("{}x{}", width::lanes(p.width), p.speed.name())
}

/// Writes the fabric as ibnetdiscover prints it: one record per node (node order), each
/// connected port on its own line with the peer's id, port, and a comment carrying
/// description, LIDs, width and speed. ibsim accepts the output as a net file.
pub fn write_ibnetdiscover(f: &Fabric, opts: &WriteOptions, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "#")?;
    writeln!(out, "# Topology file: written by ibsm")?;
    if let Some(c) = &opts.comment {
        for l in c.lines() {
            writeln!(out, "# {l}")?;
        }
    }
    writeln!(out, "#")?;
    for (i, node) in f.nodes().iter().enumerate() {
        let n = NodeIdx(i as u32);
        writeln!(out)?;
        writeln!(out, "vendid={:#x}", node.vendor_id)?;
        writeln!(out, "devid={:#x}", node.device_id)?;
        writeln!(out, "sysimgguid={:#x}", node.system_guid.0)?;
        let id = node_id(f, n);
        let desc = clean(&node.description);
        match node.kind {
            NodeKind::Switch => {
                let (lid, lmc) = f
                    .port_of(n, 0)
                    .map(|p| (f.port(p).lid.0, f.port(p).lmc))
                    .unwrap_or_default();
                writeln!(out, "switchguid={:#x}({:x})", node.guid.0, node.guid.0)?;
                let p0 = if node.enhanced_port0 {
                    "enhanced"
                } else {
                    "base"
                };
                writeln!(
                    out,
                    "Switch\t{} \"{id}\"\t\t# \"{desc}\" {p0} port 0 lid {lid} lmc {lmc}",
                    node.num_ports
                )?;
            }
            NodeKind::Ca | NodeKind::Router => {
                let (key, kw) = if node.kind == NodeKind::Ca {
                    ("caguid", "Ca")
                } else {
                    ("rtguid", "Rt")
                };
                writeln!(out, "{key}={:#x}", node.guid.0)?;
                writeln!(out, "{kw}\t{} \"{id}\"\t\t# \"{desc}\"", node.num_ports)?;
            }
        }
        for pi in f.node_ports(n) {
            let p = f.port(pi);
            let Some(r) = p.remote else { continue };
            let rp = f.port(r);
            let rnode = f.node(rp.node);
            let rid = node_id(f, rp.node);
            let rlid = f.port(f.lid_port(r)).lid.0;
            let rdesc = clean(&rnode.description);
            let rguid = if rnode.kind == NodeKind::Switch {
                String::new()
            } else {
                format!("({:x})", rp.guid.0)
            };
            if node.kind == NodeKind::Switch {
                writeln!(
                    out,
                    "[{}]\t\"{rid}\"[{}]{rguid}\t\t# \"{rdesc}\" lid {rlid} {}",
                    p.num,
                    rp.num,
                    rate(p)
                )?;
            } else {
                writeln!(
                    out,
                    "[{}]({:x}) \t\"{rid}\"[{}]{rguid}\t\t# lid {} lmc {} \"{rdesc}\" lid {rlid} {}",
                    p.num,
                    p.guid.0,
                    rp.num,
                    p.lid.0,
                    p.lmc,
                    rate(p)
                )?;
            }
        }
    }
    Ok(())
}
