//! Service levels as files: the SL of every path (`--path-sl-out`) and the SL-to-VL tables
//! every port needs for them (`opensm-sl2vl.dump`'s layout).
//!
//! SLs map to VLs one to one (SL `i` travels on VL `i`) for the SLs the routes use; the
//! others map to VL 0, as nothing routed uses them.

use std::io::{self, Write};

use sm_core::NodeKind;
use sm_mad::Lid;

use crate::routes::Routes;
use crate::topo::Topo;

/// The VL of `sl` when `vls` lanes are in use.
pub fn vl_of(sl: u8, vls: u8) -> u8 {
    if sl < vls { sl } else { 0 }
}

/// One line per source LID (every LID of every CA port hanging off a switch), in LID
/// order: `0xSSSS: s s s ...`, one hex digit per destination LID from 1 to the highest,
/// `-` where the pair is not routed (no port holds the LID, the source's switch has no
/// entry for it, or the source owns it).
pub fn write_path_sl(topo: &Topo<'_>, routes: &Routes, w: &mut dyn Write) -> io::Result<()> {
    let top = topo.max_lid().0;
    let mut sources: Vec<(Lid, usize)> = Vec::new();
    for (i, d) in topo.dests.iter().enumerate() {
        if d.kind != NodeKind::Switch {
            sources.extend(d.lids().map(|l| (l, i)));
        }
    }
    sources.sort_unstable();
    let mut line = String::with_capacity(top as usize * 2 + 16);
    for (lid, i) in sources {
        let src = &topo.dests[crate::topo::DestIdx(i as u32)];
        line.clear();
        line.push_str(&format!("0x{:04x}:", lid.0));
        for dl in 1..=top {
            let dl = Lid(dl);
            let routed = topo.dest_of(dl).is_some_and(|d| d.port != src.port)
                && routes.port(src.sw, dl).is_some();
            line.push(' ');
            if routed {
                let sl = routes.sl(src.sw, dl).min(15);
                line.push(char::from_digit(u32::from(sl), 16).unwrap_or('f'));
            } else {
                line.push('-');
            }
        }
        line.push('\n');
        w.write_all(line.as_bytes())?;
    }
    Ok(())
}

/// A block per port that owns LIDs (switches by port 0, then CA ports), in GUID order:
/// `Switch 0xGUID, base LID N, "desc"`, then one row `in out : vl x16` per input port and
/// linked output port of a switch, or the single row `0 0` of a CA port.
pub fn write_sl2vl(topo: &Topo<'_>, routes: &Routes, w: &mut dyn Write) -> io::Result<()> {
    let f = topo.fabric;
    let vls = routes.vls_used();
    let mut row = String::new();
    for sl in 0..16u8 {
        row.push_str(&format!(" {:<2}", vl_of(sl, vls)));
    }
    let mut ports: Vec<_> = topo.dests.iter().collect();
    ports.sort_by_key(|d| (d.kind != NodeKind::Switch, d.guid));
    for d in ports {
        let node = f.node(f.port(d.port).node);
        let kind = if node.kind == NodeKind::Switch {
            "Switch"
        } else {
            "Channel Adapter"
        };
        writeln!(
            w,
            "{kind} 0x{:016x}, base LID {}, \"{}\"",
            d.guid.0, d.base_lid.0, node.description
        )?;
        writeln!(
            w,
            "#in out : 0  1  2  3  4  5  6  7  8  9  10 11 12 13 14 15"
        )?;
        writeln!(w, "#{}", "-".repeat(56))?;
        if node.kind == NodeKind::Switch {
            let n = f.port(d.port).node;
            for out in 0..=node.num_ports {
                let linked = out == 0
                    || f.port_of(n, out)
                        .is_some_and(|p| f.port(p).remote.is_some());
                if !linked {
                    continue;
                }
                for inp in 0..=node.num_ports {
                    writeln!(w, "{inp:<3} {out:<3} :{row}")?;
                }
            }
        } else {
            writeln!(w, "{:<3} {:<3} :{row}", 0, 0)?;
        }
        writeln!(w, "#{}\n", "-".repeat(56))?;
    }
    Ok(())
}

/// Where and why an SL file was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {reason}")]
pub struct SlFileError {
    pub file: String,
    pub line: usize,
    pub reason: String,
}

/// The SL of paths per source LID, as [`write_path_sl`] writes them (or as gathered from an
/// SA's PathRecords): `get(source LID, destination LID)`, `None` for `-` or beyond the line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceSl {
    rows: std::collections::HashMap<u16, Vec<u8>>,
}

/// A destination without a route in [`SourceSl`].
const NO_SL: u8 = 0xFF;

impl SourceSl {
    /// Reads the text of a path-SL file; `file` names it in errors. Blank lines and lines
    /// starting with `#` are skipped.
    pub fn parse(text: &str, file: &str) -> Result<SourceSl, SlFileError> {
        let err = |line: usize, reason: String| SlFileError {
            file: file.to_string(),
            line,
            reason,
        };
        let mut rows = std::collections::HashMap::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (lid, rest) = line
                .split_once(':')
                .ok_or_else(|| err(i + 1, "expected `0xLID: s s s ...`".into()))?;
            let lid = parse_lid(lid.trim()).ok_or_else(|| {
                err(
                    i + 1,
                    format!("source LID: \"{}\" is not a LID", lid.trim()),
                )
            })?;
            let mut row = Vec::new();
            for (k, tok) in rest.split_whitespace().enumerate() {
                let sl = if tok == "-" {
                    NO_SL
                } else {
                    match u8::from_str_radix(tok, 16) {
                        Ok(v) if v < 16 => v,
                        _ => {
                            return Err(err(
                                i + 1,
                                format!(
                                    "destination LID {}: \"{tok}\" is not an SL (0-f) or `-`",
                                    k + 1
                                ),
                            ));
                        }
                    }
                };
                row.push(sl);
            }
            if rows.insert(lid, row).is_some() {
                return Err(err(i + 1, format!("source LID {lid} is listed twice")));
            }
        }
        Ok(SourceSl { rows })
    }

    /// The SL from `src` to `dst`.
    pub fn get(&self, src: Lid, dst: Lid) -> Option<u8> {
        let row = self.rows.get(&src.0)?;
        let sl = *row.get(usize::from(dst.0).checked_sub(1)?)?;
        (sl != NO_SL).then_some(sl)
    }

    /// Source LIDs listed.
    pub fn sources(&self) -> usize {
        self.rows.len()
    }
}

fn parse_lid(s: &str) -> Option<u16> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u16::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// The VL of each SL, read from SL-to-VL tables in `opensm-sl2vl.dump`'s layout. The
/// validation keeps one VL per path, so every row must map each SL to the same VL; a table
/// that changes VL from hop to hop is refused, naming the first row that differs.
pub fn read_uniform_sl2vl(text: &str, file: &str) -> Result<[u8; 16], SlFileError> {
    let err = |line: usize, reason: String| SlFileError {
        file: file.to_string(),
        line,
        reason,
    };
    let mut first: Option<([u8; 16], usize)> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((ports, vls)) = line.split_once(':') else {
            // A block header (`Switch 0x..., base LID N, "desc"`).
            continue;
        };
        if ports.split_whitespace().count() != 2
            || !ports.split_whitespace().all(|t| t.parse::<u8>().is_ok())
        {
            continue;
        }
        let mut row = [0u8; 16];
        let vals: Vec<&str> = vls.split_whitespace().collect();
        if vals.len() != 16 {
            return Err(err(i + 1, format!("{} VLs, expected 16", vals.len())));
        }
        for (sl, v) in vals.iter().enumerate() {
            row[sl] = v
                .parse::<u8>()
                .ok()
                .filter(|&v| v < 16)
                .ok_or_else(|| err(i + 1, format!("SL {sl}: \"{v}\" is not a VL (0-15)")))?;
        }
        match first {
            None => first = Some((row, i + 1)),
            Some((f, at)) => {
                if let Some(sl) = (0..16).find(|&s| f[s] != row[s]) {
                    return Err(err(
                        i + 1,
                        format!(
                            "SL {sl} goes on VL {} here and on VL {} at line {at}: tables that \
                             change VL from hop to hop are not analysed",
                            row[sl], f[sl]
                        ),
                    ));
                }
            }
        }
    }
    first
        .map(|(f, _)| f)
        .ok_or_else(|| err(0, "no SL-to-VL row in it".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_sl_round_trips_and_names_bad_fields() {
        let t = SourceSl::parse("# x\n0x0002: 0 - 3 f\n5: 1\n", "f").unwrap();
        assert_eq!(t.get(Lid(2), Lid(1)), Some(0));
        assert_eq!(t.get(Lid(2), Lid(2)), None);
        assert_eq!(t.get(Lid(2), Lid(4)), Some(15));
        assert_eq!(t.get(Lid(2), Lid(9)), None);
        assert_eq!(t.get(Lid(5), Lid(1)), Some(1));
        let e = SourceSl::parse("0x2: 0 g\n", "p.txt").unwrap_err();
        assert_eq!(
            e.to_string(),
            "p.txt:1: destination LID 2: \"g\" is not an SL (0-f) or `-`"
        );
        let e = SourceSl::parse("0x2: 0\nzz: 1\n", "p.txt").unwrap_err();
        assert!(e.to_string().starts_with("p.txt:2: source LID"), "{e}");
    }

    #[test]
    fn uniform_sl2vl_is_read_and_per_hop_changes_are_refused() {
        let row = "0   1   : 0  1  2  3  4  5  6  7  0  0  0  0  0  0  0  0";
        let text = format!("Switch 0x1, base LID 1, \"s\"\n#in out : ...\n{row}\n{row}\n");
        let m = read_uniform_sl2vl(&text, "d").unwrap();
        assert_eq!(m[3], 3);
        assert_eq!(m[9], 0);
        let other = "1   2   : 0  1  2  4  4  5  6  7  0  0  0  0  0  0  0  0";
        let e = read_uniform_sl2vl(&format!("{text}{other}\n"), "d").unwrap_err();
        assert!(e.to_string().contains("d:5: SL 3 goes on VL 4 here"), "{e}");
    }
}
