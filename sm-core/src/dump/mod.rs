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

pub use lft::{BLOCK_LEN, Destination, Lfts, Mismatch, NO_ROUTE, SwitchLft};

use crate::fabric::{Fabric, PortIdx};
use sm_mad::Lid;

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
