//! What the nodes hold of what we programmed, as far as their answers confirmed it: the
//! blocks of each switch's forwarding table that equal the current plan's, the
//! LinearFDBTop we last set, and the P_Key / SL-to-VL / VL arbitration blocks.
//!
//! Everything is keyed by GUID, so it survives a new discovery (new indices). Forwarding
//! tables are tracked as one bit per block relative to the plan (the plan has the bytes),
//! so a 48K-LID subnet pays 1 bit, not 64 bytes, per block; [`Shadow::rebase`] carries the
//! bits over to a new plan, keeping the blocks that did not change.

use std::collections::HashMap;

use sm_mad::{Guid, Lid};

use super::plan::Plan;

/// A table block a node holds: (node GUID, port addressed, attribute id, modifier).
pub(crate) type TableKey = (Guid, u8, u16, u32);

/// One bit per LFT block.
#[derive(Debug, Clone, Default)]
struct Bits(Vec<u64>);

impl Bits {
    fn get(&self, i: usize) -> bool {
        self.0.get(i / 64).is_some_and(|w| w >> (i % 64) & 1 == 1)
    }
    fn clear(&mut self, i: usize) {
        if let Some(w) = self.0.get_mut(i / 64) {
            *w &= !(1 << (i % 64));
        }
    }
    fn set(&mut self, i: usize) {
        if self.0.len() <= i / 64 {
            self.0.resize(i / 64 + 1, 0);
        }
        self.0[i / 64] |= 1 << (i % 64);
    }
    fn ones(&self) -> impl Iterator<Item = usize> + '_ {
        self.0.iter().enumerate().flat_map(|(w, &bits)| {
            (0..64)
                .filter(move |b| bits >> b & 1 == 1)
                .map(move |b| w * 64 + b)
        })
    }
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Shadow {
    /// Per switch: the LFT blocks known to hold what the current plan says.
    lft: HashMap<Guid, Bits>,
    /// LinearFDBTop we last set per switch: a different value means the switch forgot.
    top: HashMap<Guid, Lid>,
    tables: HashMap<TableKey, [u8; 64]>,
    /// Per port (node GUID, port number): the settings Set it answered without taking all
    /// of it (an agent that keeps a field, as ibsim's keep LinkSpeedEnabled 15 and the
    /// M_Key lease period), with what it reported: that Set is not sent to it again.
    declined: HashMap<(Guid, u8), u64>,
}

impl Shadow {
    pub(crate) fn lft_held(&self, guid: Guid, block: usize) -> bool {
        self.lft.get(&guid).is_some_and(|b| b.get(block))
    }

    /// A switch accepted block `block` of the current plan's table.
    pub(crate) fn lft_stored(&mut self, guid: Guid, block: usize) {
        self.lft.entry(guid).or_default().set(block);
    }

    /// A block is about to change: until the new contents are confirmed it is not held.
    pub(crate) fn lft_changing(&mut self, guid: Guid, block: usize) {
        if let Some(b) = self.lft.get_mut(&guid) {
            b.clear(block);
        }
    }

    pub(crate) fn top(&self, guid: Guid) -> Option<Lid> {
        self.top.get(&guid).copied()
    }

    pub(crate) fn top_stored(&mut self, guid: Guid, top: Lid) {
        self.top.insert(guid, top);
    }

    pub(crate) fn table_held(&self, key: &TableKey, data: &[u8; 64]) -> bool {
        self.tables.get(key) == Some(data)
    }

    pub(crate) fn table_stored(&mut self, key: TableKey, data: [u8; 64]) {
        self.tables.insert(key, data);
    }

    /// Whether the port answered this very Set before, reporting what it reports now,
    /// without taking all of it (`digest` covers both).
    pub(crate) fn settings_declined(&self, port: (Guid, u8), digest: u64) -> bool {
        self.declined.get(&port) == Some(&digest)
    }

    /// The port answered a settings Set: it took every setting (`digest` `None`), or kept
    /// some (the Set and what it reported after, as [`Shadow::settings_declined`] takes).
    pub(crate) fn settings_answered(&mut self, port: (Guid, u8), digest: Option<u64>) {
        match digest {
            Some(d) => {
                self.declined.insert(port, d);
            }
            None => {
                self.declined.remove(&port);
            }
        }
    }

    /// A switch lost its tables (it rebooted, or its LinearFDBTop is not ours).
    pub(crate) fn forget_switch(&mut self, guid: Guid) {
        self.lft.remove(&guid);
        self.forget_tables(guid);
    }

    /// A node lost its P_Key and QoS tables (its LIDs are gone).
    pub(crate) fn forget_tables(&mut self, guid: Guid) {
        self.tables.retain(|k, _| k.0 != guid);
    }

    /// Another SM may have programmed everything: nothing held is known.
    pub(crate) fn forget_all(&mut self) {
        self.lft.clear();
        self.top.clear();
        self.tables.clear();
        self.declined.clear();
    }

    /// Whether anything is believed held.
    pub(crate) fn is_empty(&self) -> bool {
        self.lft.is_empty() && self.top.is_empty() && self.tables.is_empty()
    }

    /// Moves the LFT bits from `old` to `new`: a block stays held where both plans have
    /// the same bytes.
    pub(crate) fn rebase(&mut self, old: Option<&Plan>, new: &Plan) {
        let Some(old) = old else {
            self.lft.clear();
            return;
        };
        let lft = std::mem::take(&mut self.lft);
        for (guid, bits) in lft {
            let (Some(on), Some(nn)) =
                (old.fabric.node_by_guid(guid), new.fabric.node_by_guid(guid))
            else {
                continue;
            };
            let mut kept = Bits::default();
            for b in bits.ones() {
                if let (Some(a), Some(c)) = (old.lft_block(on, b), new.lft_block(nn, b)) {
                    if a == c {
                        kept.set(b);
                    }
                }
            }
            self.lft.insert(guid, kept);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits() {
        let mut b = Bits::default();
        b.set(3);
        b.set(130);
        assert!(b.get(3) && b.get(130) && !b.get(4) && !b.get(1000));
        assert_eq!(b.ones().collect::<Vec<_>>(), vec![3, 130]);
    }
}
