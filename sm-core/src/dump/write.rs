//! Writers: `opensm-lfts.dump`, `ibroute` output and `opensm-subnet.lst`, as the tools
//! print them for the fabric they describe.
//!
//! The destination column of both table formats comes from the fabric: the end port
//! owning each LID (its base LID and the 2^LMC - 1 above it), its node type word, port GUID
//! and node description. Descriptions are printed as the tools do: at most 64 bytes, any
//! byte that is not printable ASCII shown as a space.

use std::io::{self, Write};

use super::lft::{BLOCK_LEN, Lfts, NO_ROUTE, SwitchLft};
use super::{LidMap, clean_desc, kind_word};
use crate::fabric::{Fabric, NodeIdx, NodeKind, Port, PortIdx, width};
use sm_mad::Lid;
use sm_mad::port_info::PortState;

/// The switch's port count, when `f` knows it as a switch.
fn switch_ports(f: &Fabric, sw: &SwitchLft) -> Option<u8> {
    let n = f.node_by_guid(sw.guid)?;
    let node = f.node(n);
    (node.kind == NodeKind::Switch).then_some(node.num_ports)
}

/// Writes `opensm-lfts.dump` as OpenSM 3.3 does: per switch (in `lfts` order; see
/// [`Lfts::sort_opensm_order`]) a header with the top LID, one line per LID 1..=top whose
/// port exists on the switch, and a trailer that repeats the top LID. Unset entries are
/// left out, as are ports beyond the switch (when `f` knows the switch) and LID 0, which
/// OpenSM never routes.
pub fn write_opensm_lfts(lfts: &Lfts, f: &Fabric, out: &mut dyn Write) -> io::Result<()> {
    let w = OpensmLftWriter::new(f);
    for sw in &lfts.switches {
        w.switch(sw, out)?;
    }
    Ok(())
}

/// [`write_opensm_lfts`] a switch at a time, for tables too many to hold as one [`Lfts`].
/// Each LID's destination text is made once, not once per switch.
pub struct OpensmLftWriter<'f> {
    f: &'f Fabric,
    /// What follows `0xLLLL PPP ` on the line of each LID: `tails[offs[l]..offs[l + 1]]`.
    tails: String,
    offs: Vec<u32>,
}

const UNKNOWN_TAIL: &str = "# unknown node and type\n";

impl<'f> OpensmLftWriter<'f> {
    pub fn new(f: &'f Fabric) -> OpensmLftWriter<'f> {
        use std::fmt::Write as _;
        let lids = LidMap::new(f);
        let (mut tails, mut offs) = (String::new(), vec![0u32]);
        for p in &lids.owner {
            match p {
                Some(p) => {
                    let port = f.port(*p);
                    let node = f.node(port.node);
                    let _ = writeln!(
                        tails,
                        "# {} portguid 0x{:016x}: '{}'",
                        kind_word(node.kind),
                        port.guid.0,
                        clean_desc(&node.description)
                    );
                }
                None => tails.push_str(UNKNOWN_TAIL),
            }
            offs.push(tails.len() as u32);
        }
        OpensmLftWriter { f, tails, offs }
    }

    fn tail(&self, lid: Lid) -> &str {
        let l = usize::from(lid.0);
        match (self.offs.get(l), self.offs.get(l + 1)) {
            (Some(&a), Some(&b)) => self
                .tails
                .get(a as usize..b as usize)
                .unwrap_or(UNKNOWN_TAIL),
            _ => UNKNOWN_TAIL,
        }
    }

    /// One switch's block.
    pub fn switch(&self, sw: &SwitchLft, out: &mut dyn Write) -> io::Result<()> {
        let ports = switch_ports(self.f, sw);
        let top = sw.top().0;
        let mut text = format!(
            "Unicast lids [0-{top}] of switch Lid {} guid 0x{:016x} ('{}'):\n",
            sw.lid.0,
            sw.guid.0,
            clean_desc(&sw.desc)
        )
        .into_bytes();
        const HEX: &[u8; 16] = b"0123456789abcdef";
        for (lid, port) in sw.routes() {
            if lid.0 == 0 || ports.is_some_and(|n| port > n) {
                continue;
            }
            let l = lid.0;
            text.extend_from_slice(&[
                b'0',
                b'x',
                HEX[usize::from(l >> 12)],
                HEX[usize::from(l >> 8 & 15)],
                HEX[usize::from(l >> 4 & 15)],
                HEX[usize::from(l & 15)],
                b' ',
                b'0' + port / 100,
                b'0' + port / 10 % 10,
                b'0' + port % 10,
                b' ',
            ]);
            text.extend_from_slice(self.tail(lid).as_bytes());
            if text.len() >= 1 << 16 {
                out.write_all(&text)?;
                text.clear();
            }
        }
        text.extend_from_slice(format!("{top} lids dumped\n").as_bytes());
        out.write_all(&text)
    }
}

/// How `ibroute` was run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IbrouteOptions {
    /// `-a`: also print entries whose port is beyond the switch (as `illegal port`).
    pub all: bool,
    /// `-n`: no destination column.
    pub brief: bool,
}

/// Writes the tables as `ibroute` prints them, one run per switch (in `lfts` order)
/// concatenated, each for LIDs 0 to the table's top, addressed by the switch's LID (`Lid 0`
/// when the table does not know it). An entry is valid when its port exists on the switch
/// (when `f` does not know the switch: when it is set).
///
/// ibroute's quirks are reproduced: it reads blocks up to `ALIGN(top, 64) / 64`, so a top
/// LID that is a multiple of 64 is not printed; with LMC > 0 the LIDs after a port's base
/// LID print as `path #n out of m`; and `-a` prints LID 0 as `path #0 - illegal port`.
/// The destination column assumes every LID owned in the fabric answers ibroute's query;
/// LIDs nobody owns print as `unknown node and type`.
pub fn write_ibroute(
    lfts: &Lfts,
    f: &Fabric,
    opts: IbrouteOptions,
    out: &mut dyn Write,
) -> io::Result<()> {
    let lids = LidMap::new(f);
    for sw in &lfts.switches {
        let ports = switch_ports(f, sw);
        let top = sw.top().0 as usize;
        writeln!(
            out,
            "Unicast lids [0x0-0x{top:x}] of switch Lid {} guid 0x{:016x} ({}):",
            sw.lid.0,
            sw.guid.0,
            clean_desc(&sw.desc)
        )?;
        writeln!(out, "  Lid  Out   Destination")?;
        writeln!(out, "       Port     Info ")?;
        let stop = (top + 1).min(top.div_ceil(BLOCK_LEN) * BLOCK_LEN);
        let mut dest = DestState::default();
        let mut n = 0usize;
        for (lid, &port) in sw.ports.iter().enumerate().take(stop) {
            let valid = match ports {
                Some(np) => port <= np,
                None => port != NO_ROUTE,
            };
            if !valid && !opts.all {
                continue;
            }
            let lid = lid as u16;
            let text = if opts.brief {
                String::new()
            } else {
                dest.describe(f, &lids, lid, valid)
            };
            writeln!(out, "0x{lid:04x} {port:03} {text}")?;
            n += 1;
        }
        let valid = if opts.all { "" } else { "valid " };
        writeln!(out, "{n} {valid}lids dumped ")?;
    }
    Ok(())
}

/// ibroute's memory of the last LMC range it resolved (static in the tool, so it lasts
/// one run: one switch).
#[derive(Debug, Default)]
struct DestState {
    base: u32,
    last: u32,
    port_guid: u64,
}

impl DestState {
    fn describe(&mut self, f: &Fabric, lids: &LidMap, lid: u16, valid: bool) -> String {
        let lid32 = lid as u32;
        if lid32 <= self.last {
            let nth = lid32 - self.base.min(lid32);
            let of = self.last - self.base + 1;
            return if !valid {
                format!(": (path #{nth} - illegal port)")
            } else if self.port_guid == 0 {
                format!(": (path #{} out of {of})", nth + 1)
            } else {
                format!(
                    ": (path #{} out of {of}: portguid 0x{:016x})",
                    nth + 1,
                    self.port_guid
                )
            };
        }
        if !valid {
            return ": (illegal port)".into();
        }
        self.port_guid = 0;
        let Some(p) = lids.get(Lid(lid)) else {
            return ": (unknown node and type)".into();
        };
        let port = f.port(p);
        let node = f.node(port.node);
        self.port_guid = port.guid.0;
        if port.lmc > 0 {
            self.base = port.lid.0 as u32;
            self.last = self.base + (1u32 << port.lmc.min(7)) - 1;
        }
        format!(
            ": ({} portguid 0x{:016x}: '{}')",
            kind_word(node.kind),
            port.guid.0,
            clean_desc(&node.description)
        )
    }
}

/// What `opensm-subnet.lst` needs beyond the fabric.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SubnetLstOptions {
    /// The master SM's LID: ports whose node's LID (a switch's port 0, a CA's own port)
    /// equals it are marked `-SM`, as OpenSM marks ports whose PortInfo LID equals their
    /// MasterSMLID. `None` marks nothing.
    pub sm_lid: Option<Lid>,
}

/// Writes `opensm-subnet.lst` as OpenSM 3.3 does: for every node (ordered by GUID bytes
/// lowest first, as OpenSM's GUID map iterates) and every linked port, one line with both
/// ends and the link's width, state and speed.
///
/// Two oddities of OpenSM's are kept: the local end prints VenID with 6 digits, the remote
/// end with 8, and the remote DevID is printed shifted 16 bits left (a 32-bit byte swap of
/// a 16-bit field). Width 2x prints as `2x` (OpenSM does when the port reports 2x support).
pub fn write_subnet_lst(f: &Fabric, opts: SubnetLstOptions, out: &mut dyn Write) -> io::Result<()> {
    let mut nodes: Vec<NodeIdx> = (0..f.nodes().len() as u32).map(NodeIdx).collect();
    nodes.sort_by_key(|&n| f.node(n).guid.0.swap_bytes());
    for n in nodes {
        for p in f.node_ports(n) {
            let port = f.port(p);
            let Some(r) = port.remote else { continue };
            if port.num == 0 {
                continue;
            }
            write!(out, "{}", end_text(f, p, opts, false))?;
            write!(out, "{}", end_text(f, r, opts, true))?;
            writeln!(
                out,
                "PHY={} LOG={} SPD={}",
                width_text(port.width),
                state_text(port.state),
                speed_text(port)
            )?;
        }
    }
    Ok(())
}

/// `{ SW-SM Ports:08 ... LID:0001 PN:03 } ` for one end of a link.
fn end_text(f: &Fabric, p: PortIdx, opts: SubnetLstOptions, remote: bool) -> String {
    let port = f.port(p);
    let node = f.node(port.node);
    let lid = f.port(f.lid_port(p)).lid;
    let ty = match node.kind {
        NodeKind::Switch => "SW",
        NodeKind::Ca => "CA",
        NodeKind::Router => "Rt",
    };
    let sm = if opts.sm_lid == Some(lid) { "-SM" } else { "" };
    let vendor = node.vendor_id & 0xff_ffff;
    let (vendor, device) = if remote {
        (
            format!("{vendor:08X}"),
            format!("{:04X}", (node.device_id as u32) << 16),
        )
    } else {
        (format!("{vendor:06X}"), format!("{:04X}", node.device_id))
    };
    format!(
        "{{ {ty}{sm} Ports:{:02X} SystemGUID:{:016x} NodeGUID:{:016x} PortGUID:{:016x} VenID:{vendor} DevID:{device} Rev:{:08X} {{{}}} LID:{:04X} PN:{:02X} }} ",
        node.num_ports,
        node.system_guid.0,
        node.guid.0,
        port.guid.0,
        node.revision,
        clean_desc(&node.description),
        lid.0,
        port.num
    )
}

fn width_text(w: u8) -> &'static str {
    match w {
        width::X1 => "1x",
        width::X2 => "2x",
        width::X4 => "4x",
        width::X8 => "8x",
        width::X12 => "12x",
        _ => "??",
    }
}

fn state_text(s: PortState) -> &'static str {
    match s {
        PortState::Active => "ACT",
        PortState::Armed => "ARM",
        PortState::Init => "INI",
        _ => "DWN",
    }
}

fn speed_text(p: &Port) -> &'static str {
    let s = &p.speed;
    if s.ext != 0 {
        return match s.ext {
            1 => "14",
            2 => "25",
            4 => "50",
            _ => "??",
        };
    }
    if s.fdr10 {
        return "FDR10";
    }
    match s.speed {
        1 => "2.5",
        2 => "5",
        4 => "10",
        _ => "??",
    }
}
