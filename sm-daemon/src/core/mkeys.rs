//! The M_Keys the SM presents and programs (IBA 14.2.4). Every SMP carries the key of the
//! port whose agent checks it: the key that port is known to hold (learned from a PortInfo
//! answer, or set by our own Set; kept in `guid2mkey`), else the key the SM gives it (the
//! configured `m_key`, or one derived from it per port with `m_key_per_port`). Before
//! discovery has read the node behind a link, the `neighbors` store says whose key that is.
//!
//! A port holding a key the SM does not know (another SM's, or a host's own) refuses every
//! SMP at protection level 2 and says so with Trap 256: the SM logs that once per port, the
//! node is left out as unresponsive with back-off (never a loop), and once the port's
//! M_Key lease runs out (protection back to 0, C14-18) a PortInfo Get shows its key, which
//! the next Set presents to install ours.

use std::collections::{BTreeMap, HashMap};

use sm_core::mkey::{KeyStore, Neighbors, derive};
use sm_mad::{Guid, Lid, port_info};

use super::Params;
use super::model::Discovered;

/// Whose key an SMP must carry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum KeyHolder {
    /// The port or node the SMP targets in the model.
    #[default]
    FromTarget,
    /// The key holder with this GUID (a CA port's GUID, a switch's).
    Guid(Guid),
    /// Whoever is behind port `.1` of node `.0`, as the neighbors store remembers.
    Behind(Guid, u8),
    /// The SM's own port.
    Own,
}

/// The neighbors store's entry for the SM's own port.
const OWN: (Guid, u8) = (Guid(0), 0);

#[derive(Debug, Default)]
pub(super) struct MKeys {
    base: u64,
    per_port: bool,
    held: KeyStore,
    neighbors: Neighbors,
    changed: bool,
    /// Trap 256 (bad M_Key) per issuer.
    refused: BTreeMap<Lid, u64>,
    /// The key a port held before a Set sent to change it: what to present again should
    /// that Set not have arrived.
    before: HashMap<Guid, u64>,
    /// Key holders by LID, as the last plan assigned them (traps name a LID).
    by_lid: HashMap<Lid, Guid>,
}

impl MKeys {
    pub(super) fn new(p: &Params) -> MKeys {
        let mut neighbors = p.neighbors.clone();
        if let Some(g) = p.own_guid {
            neighbors.set(OWN.0, OWN.1, g);
        }
        MKeys {
            base: p.m_key,
            per_port: p.m_key_per_port,
            held: p.m_keys.clone(),
            neighbors,
            ..MKeys::default()
        }
    }

    /// The key the SM gives the port with GUID `holder`.
    pub(super) fn wanted(&self, holder: Guid) -> u64 {
        wanted(self.base, self.per_port, holder)
    }

    /// The key to present to `holder` (unknown: the configured key).
    pub(super) fn present(&self, holder: Option<Guid>) -> u64 {
        match holder {
            Some(h) => self.held.get(h).unwrap_or_else(|| self.wanted(h)),
            None => self.base,
        }
    }

    /// The key holder a [`KeyHolder`] that needs no model names.
    pub(super) fn holder(&self, k: KeyHolder) -> Option<Guid> {
        match k {
            KeyHolder::Guid(g) => Some(g),
            KeyHolder::Behind(n, p) => self.neighbors.get(n, p),
            KeyHolder::Own => self.neighbors.get(OWN.0, OWN.1),
            KeyHolder::FromTarget => None,
        }
    }

    /// A PortInfo answer of an end port (a CA port, a switch's port 0): the key it holds,
    /// when the answer shows one. Zero is none to remember: hidden by protection level 1,
    /// or no key at all, which takes any key; remembered, it would be presented after
    /// another SM with this configuration gave the port ours (a standby taking over).
    pub(super) fn learn(&mut self, holder: Guid, pi: &port_info::Repr) {
        if pi.m_key == 0 {
            return;
        }
        self.before.remove(&holder);
        self.changed |= self.held.set(holder, pi.m_key);
    }

    /// A Set giving `holder` the key `new` is on its way: SMPs sent after it present the new
    /// key (the agent takes them in order), as OpenSM does.
    pub(super) fn sending(&mut self, holder: Guid, new: u64) {
        let old = self.present(Some(holder));
        if old != new {
            self.before.insert(holder, old);
            self.changed |= self.held.set(holder, new);
        }
    }

    /// An SMP to `holder` went unanswered after its retries: if a key change was on its
    /// way, it may not have arrived, so the other key is presented next; else the key this
    /// SM gives, if it presented another.
    pub(super) fn lost(&mut self, holder: Guid) {
        if let Some(other) = self.before.remove(&holder) {
            let cur = self.present(Some(holder));
            self.before.insert(holder, cur);
            self.changed |= self.held.set(holder, other);
            return;
        }
        // Another SM with this configuration may have given it our key since we learned
        // the one it held (a standby that read its own port before the master keyed it):
        // ours is presented next, and the two take turns while it stays silent.
        let (cur, want) = (self.present(Some(holder)), self.wanted(holder));
        if cur != want {
            self.before.insert(holder, cur);
            self.changed |= self.held.set(holder, want);
        }
    }

    /// Notes which holder has which LID (after a plan).
    pub(super) fn note_lids(&mut self, f: &sm_core::Fabric) {
        self.by_lid.clear();
        for p in f.ports() {
            let switch = f.node(p.node).kind == sm_core::NodeKind::Switch;
            if p.exists && p.lid.0 != 0 && (!switch || p.num == 0) {
                self.by_lid.insert(p.lid, p.guid);
            }
        }
    }

    /// The key holder at LID `l` (its base LID), as the last plan assigned it.
    pub(super) fn at_lid(&self, l: Lid) -> Option<Guid> {
        self.by_lid.get(&l).copied()
    }

    /// Remembers who is behind every link of a finished discovery, and the SM's own port.
    pub(super) fn note_neighbors(&mut self, m: &Discovered) {
        let f = &m.fabric;
        for p in f.ports() {
            let Some(r) = p.remote else { continue };
            let node = f.node(p.node).guid;
            self.changed |= self.neighbors.set(node, p.num, f.port(r).guid);
        }
        self.changed |= self.neighbors.set(OWN.0, OWN.1, m.own_guid());
    }

    /// Whether the stores changed since the last call (to be saved).
    pub(super) fn take_changed(&mut self) -> bool {
        std::mem::take(&mut self.changed)
    }

    pub(super) fn stores(&self) -> (&KeyStore, &Neighbors) {
        (&self.held, &self.neighbors)
    }

    /// A Trap 256 from `issuer`: true the first time that issuer sends one.
    pub(super) fn refused(&mut self, issuer: Lid) -> bool {
        let n = self.refused.entry(issuer).or_default();
        *n += 1;
        *n == 1
    }

    /// Trap 256s so far, all issuers.
    pub(super) fn refusals(&self) -> u64 {
        self.refused.values().sum()
    }
}

/// The key the SM gives the port with GUID `holder`.
pub(super) fn wanted(base: u64, per_port: bool, holder: Guid) -> u64 {
    if per_port && base != 0 {
        derive(base, holder)
    } else {
        base
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_keys_win_then_derived_then_configured() {
        let p = Params {
            m_key: 0x77,
            m_key_per_port: true,
            ..Params::default()
        };
        let mut k = MKeys::new(&p);
        assert_eq!(k.present(None), 0x77);
        assert_eq!(k.present(Some(Guid(5))), derive(0x77, Guid(5)));
        let pi = |m_key, bits| port_info::Repr {
            m_key,
            m_key_protect_bits: bits,
            ..port_info::Repr::default()
        };
        // Hidden by protection level 1: not a key.
        k.learn(Guid(5), &pi(0, 1));
        assert!(!k.take_changed());
        k.learn(Guid(5), &pi(0x99, 2));
        assert!(k.take_changed());
        assert_eq!(k.present(Some(Guid(5))), 0x99);
        // No key at all takes any: ours is presented, so it still passes once another
        // SM with this configuration keys the port.
        k.learn(Guid(6), &pi(0, 0));
        assert_eq!(k.present(Some(Guid(6))), derive(0x77, Guid(6)));
        // A key learned, then silence: ours is tried next, and the two take turns.
        k.learn(Guid(7), &pi(0x42, 3));
        k.lost(Guid(7));
        assert_eq!(k.present(Some(Guid(7))), derive(0x77, Guid(7)));
        k.lost(Guid(7));
        assert_eq!(k.present(Some(Guid(7))), 0x42);
        assert_eq!(k.holder(KeyHolder::Behind(Guid(1), 2)), None);
        assert!(k.refused(Lid(3)) && !k.refused(Lid(3)) && k.refused(Lid(4)));
        assert_eq!(k.refusals(), 3);
    }
}
