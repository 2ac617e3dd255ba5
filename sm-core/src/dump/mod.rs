//! Forwarding-table and subnet dumps: the formats other tools print, read and written.
//!
//! - [`Lfts`]: the linear forwarding tables of a subnet, one dense `Vec<u8>` of output ports
//!   per switch (index = LID, [`NO_ROUTE`] = unset). Routing engines produce it, `ibsm
//!   analyze` consumes it, and a Set(LinearForwardingTable) carries one 64-entry
//!   [`SwitchLft::blocks`] slice of it.
//! - Readers for OpenSM's `opensm-lfts.dump` and for `ibroute` output (several runs
//!   concatenated, with `-a` and `-n`), with [`detect_format`] telling them apart. Errors
//!   name the file, the line and what is wrong.
//! - Writers for both, byte-for-byte as the tools print them for the fabric they describe,
//!   and for OpenSM's `opensm-subnet.lst`.
//! - [`Lfts::check_against`]: whether tables describe a given fabric at all (switch GUIDs,
//!   port numbers, who owns each LID), so a table from another run is refused rather than
//!   analysed into a wrong answer.

mod lft;
mod read;
mod write;

pub use lft::{BLOCK_LEN, Destination, Lfts, Mismatch, NO_ROUTE, SwitchLft};
pub use read::{detect_format, read_lfts, read_lfts_as, read_lfts_str};
pub use write::{
    IbrouteOptions, OpensmLftWriter, SubnetLstOptions, write_ibroute, write_opensm_lfts,
    write_subnet_lst,
};

use std::path::PathBuf;

use crate::fabric::{Fabric, NodeKind, PortIdx};
use sm_mad::{Guid, Lid};

/// The two forwarding-table text formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum LftFormat {
    /// OpenSM's `opensm-lfts.dump`.
    OpenSm,
    /// `ibroute` output (infiniband-diags), possibly several runs concatenated.
    Ibroute,
}

/// Where and why a dump file was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}:{line}: {kind}", file.display())]
pub struct DumpError {
    pub file: PathBuf,
    /// 1-based line (0 when the file could not be read at all).
    pub line: usize,
    pub kind: DumpErrorKind,
}

/// What is wrong in a dump file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DumpErrorKind {
    #[error("cannot read file: {0}")]
    Io(String),
    #[error("syntax error: {0}")]
    Syntax(String),
    #[error("multicast forwarding tables are not supported (only unicast LFTs)")]
    Multicast,
    #[error("forwarding entry outside a table (no `Unicast lids ...` header before it)")]
    EntryOutsideTable,
    #[error("LID range [{start:#x}-{end:#x}] is empty or reversed")]
    BadRange { start: u32, end: u32 },
    #[error("LID range end {0:#x} is beyond the unicast LIDs (0xbfff)")]
    TopOutOfRange(u32),
    #[error("LID {lid:#06x} is outside the table's range [{start:#x}-{end:#x}]")]
    LidOutOfRange { lid: u32, start: u16, end: u16 },
    #[error("LID {lid:#06x} after LID {previous:#06x}: entries must ascend")]
    LidOrder { lid: u16, previous: u16 },
    #[error("port {0} is out of range 0..=255")]
    PortOutOfRange(u32),
    #[error("the trailer says {said} lids dumped, the table has {expected}")]
    CountMismatch { said: u64, expected: usize },
    #[error("the table of switch {0} has no `... lids dumped` trailer (truncated file?)")]
    MissingTrailer(Guid),
    #[error("switch {guid} is listed again with a different {what}")]
    ConflictingHeader { guid: Guid, what: String },
    #[error("switch {guid}: LID {lid:#06x} is routed to port {first} earlier, to port {now} here")]
    ConflictingEntry {
        guid: Guid,
        lid: u16,
        first: u8,
        now: u8,
    },
    #[error("LID {lid:#06x} is {first} on line {first_line}, but {now} here")]
    ConflictingDestination {
        lid: u16,
        first_line: usize,
        first: String,
        now: String,
    },
}

/// The node-type words both tools print ("Channel Adapter", "Switch", "Router").
pub(crate) fn kind_word(k: NodeKind) -> &'static str {
    match k {
        NodeKind::Ca => "Channel Adapter",
        NodeKind::Switch => "Switch",
        NodeKind::Router => "Router",
    }
}

/// A node description as the tools print it: at most 64 bytes, every byte that is not
/// printable ASCII shown as a space (what `clean_nodedesc` does in the C locale).
pub(crate) fn clean_desc(desc: &str) -> String {
    let mut out = String::with_capacity(desc.len());
    for c in desc.chars() {
        if out.len() + c.len_utf8() > 64 {
            break;
        }
        if c.is_ascii_graphic() || c == ' ' {
            out.push(c);
        } else {
            out.extend(std::iter::repeat_n(' ', c.len_utf8()));
        }
    }
    out
}

/// Which end port owns each LID (its base LID and the 2^LMC - 1 above it).
#[derive(Debug)]
pub(crate) struct LidMap {
    owner: Vec<Option<PortIdx>>,
}

impl LidMap {
    pub(crate) fn new(f: &Fabric) -> LidMap {
        let mut owner: Vec<Option<PortIdx>> = Vec::new();
        for p in f.end_ports() {
            let port = f.port(p);
            if port.lid.0 == 0 {
                continue;
            }
            let first = port.lid.0 as usize;
            let last = (first + (1usize << port.lmc.min(7)) - 1).min(u16::MAX as usize);
            if owner.len() <= last {
                owner.resize(last + 1, None);
            }
            for slot in &mut owner[first..=last] {
                slot.get_or_insert(p);
            }
        }
        LidMap { owner }
    }

    /// The end port owning `lid`.
    pub(crate) fn get(&self, lid: Lid) -> Option<PortIdx> {
        self.owner.get(lid.0 as usize).copied().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_are_cleaned_like_the_tools() {
        assert_eq!(clean_desc("Hca1"), "Hca1");
        assert_eq!(clean_desc("a\tb\nc"), "a b c");
        // One space per byte of a non-ASCII character.
        assert_eq!(clean_desc("é"), "  ");
        assert_eq!(clean_desc(&"x".repeat(70)).len(), 64);
    }
}
