//! Multicast forwarding, as a state machine of its own: the SA's groups become a spanning
//! tree each (sm-routing's [`McastPlanner`], in the unicast engine's up/down order so
//! multicast adds no credit loop), and [`McastState::sync`] lists the MFT (block, position)
//! pairs and MulticastFDBTops that differ from what each switch holds; the core sends them
//! and reports each answer back ([`McastState::settle`]).
//!
//! A heavy sweep recomputes every group once the ports are ACTIVE and the SA has its new
//! snapshot (the partitions' IPoIB groups exist by then). Between sweeps the joins and
//! leaves of one millisecond recompute their groups alone and send their blocks together
//! (OpenSM recomputes when it processes a join). A switch that advertises
//! IsMulticastFDBTopSupported on port 0 also gets SwitchInfo.MulticastFDBTop (0xBFFF when it
//! holds no group), as OpenSM's `use_mfttop` does.

use std::collections::{BTreeSet, HashMap};

use sm_core::mcast::McRegistry;
use sm_mad::{Guid, Lid, mft, port_info, switch_info};
use sm_routing::mcast::SwitchMft;
use sm_routing::{McastPlanner, Mfts, Topo, TreeOrder};

use super::model::Discovered;
use super::plan::Plan;

/// MulticastFDBTop of a switch that holds no group: below every MLID.
const NO_MLID_TOP: Lid = Lid(0xBFFF);

/// A multicast Set for one switch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum McastSet {
    Block {
        guid: Guid,
        modifier: mft::Modifier,
        block: mft::Repr,
    },
    /// SwitchInfo with a new MulticastFDBTop (the rest as the switch reported it).
    Top {
        guid: Guid,
        top: Lid,
        info: switch_info::Repr,
    },
}

/// What a sync asks for.
pub(super) struct SyncInput<'a> {
    pub(super) model: &'a Discovered,
    pub(super) plan: &'a Plan,
    pub(super) groups: &'a McRegistry,
    /// Groups the SA changed since the last sync.
    pub(super) changed: BTreeSet<Lid>,
    /// Recompute every group (a heavy sweep's end).
    pub(super) all: bool,
    /// Program MulticastFDBTop where switches support it.
    pub(super) use_top: bool,
}

/// The outcome of a sync.
#[derive(Debug, Default)]
pub(super) struct Synced {
    pub(super) sets: Vec<McastSet>,
    /// MFT blocks among `sets`.
    pub(super) blocks: usize,
    /// The wanted tables changed (the SA's MFTRecords should show them).
    pub(super) recomputed: bool,
}

/// Multicast tables wanted and held.
#[derive(Debug)]
pub(super) struct McastState {
    /// The tables the groups call for, in the last snapshot's switch order.
    want: Option<Mfts>,
    /// What each switch holds once the Sets sent to it land (by GUID). Diffs are taken
    /// against this, not against confirmed state, so a change that undoes one still in
    /// flight is sent too; a Set refused or lost makes the switch unknown again.
    sent: Mfts,
    /// MulticastFDBTop each switch holds once the Sets sent land.
    top_sent: HashMap<Guid, Lid>,
    /// Multicast Sets in flight (or queued) per switch.
    in_flight: HashMap<Guid, u32>,
}

impl Default for McastState {
    fn default() -> Self {
        McastState {
            want: None,
            sent: Mfts {
                switches: Vec::new(),
            },
            top_sent: HashMap::new(),
            in_flight: HashMap::new(),
        }
    }
}

fn has_top(m: &Discovered, guid: Guid) -> bool {
    m.fabric
        .node_by_guid(guid)
        .and_then(|n| m.fabric.port_of(n, 0))
        .and_then(|p| m.port_info(p))
        .is_some_and(|pi| pi.capability_mask & port_info::cap::IS_MULTICAST_FDB_TOP_SUPPORTED != 0)
}

impl McastState {
    /// The wanted tables, once computed.
    pub(super) fn want(&self) -> Option<&Mfts> {
        self.want.as_ref()
    }

    /// A switch lost its tables (it rebooted), or a Set to it failed: what it holds is
    /// unknown, and the next sync sends it every block.
    pub(super) fn forget(&mut self, guid: Guid) {
        self.sent.switches.retain(|t| t.guid != guid);
        self.top_sent.remove(&guid);
    }

    /// Another SM may have programmed every switch: nothing held is known.
    pub(super) fn forget_all(&mut self) {
        self.sent.switches.clear();
        self.top_sent.clear();
    }

    /// The requests in flight were dropped (a heavy sweep starts): their switches may hold
    /// anything.
    pub(super) fn forget_in_flight(&mut self) {
        let guids: Vec<Guid> = self.in_flight.drain().map(|(g, _)| g).collect();
        for g in guids {
            self.forget(g);
        }
    }

    /// What the switches reported at the end of a heavy sweep is what they hold, where no
    /// Set of ours is under way.
    pub(super) fn remember_tops(&mut self, m: &Discovered) {
        for (n, facts) in m.nodes.iter_enumerated() {
            let Some(si) = facts.switch_info else {
                continue;
            };
            let guid = m.fabric.node(n).guid;
            if !self.in_flight.contains_key(&guid) {
                self.top_sent.insert(guid, si.multicast_fdb_top);
            }
        }
    }

    /// The MulticastFDBTop a switch should hold as the wanted tables stand.
    pub(super) fn top_for(&self, guid: Guid) -> Lid {
        self.want
            .as_ref()
            .and_then(|w| w.get(guid))
            .and_then(SwitchMft::top)
            .unwrap_or(NO_MLID_TOP)
    }

    /// A multicast Set to `guid` came back (or was lost: `ok` false).
    pub(super) fn settle(&mut self, guid: Guid, ok: bool) {
        if let Some(n) = self.in_flight.get_mut(&guid) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.in_flight.remove(&guid);
            }
        }
        if !ok {
            self.forget(guid);
        }
    }

    /// Recomputes the trees (every group when `all`, else the groups the SA changed) and
    /// lists the Sets that bring the switches there; they count as sent from now on.
    pub(super) fn sync(&mut self, i: SyncInput<'_>) -> Synced {
        let mut out = Synced::default();
        let fresh = i.all || self.want.is_none();
        if fresh || !i.changed.is_empty() {
            let topo = match Topo::new(&i.plan.fabric) {
                Ok(t) => t,
                Err(e) => {
                    tracing::warn!("multicast: no snapshot of the fabric: {e}");
                    return out;
                }
            };
            // The plan's own ranks: the trees keep to the order its unicast routes obey
            // (a repair keeps those ranks), and recomputing them costs an all-pairs pass.
            let order = TreeOrder::for_rule(&i.plan.rule);
            let mut planner = McastPlanner::new(&topo, order);
            let mut want = match self.want.take() {
                Some(w) if !fresh => w,
                _ => Mfts::new(&topo),
            };
            let mlids: Vec<Lid> = if fresh {
                i.groups.groups().map(|g| g.mlid).collect()
            } else {
                i.changed.iter().copied().collect()
            };
            for mlid in mlids {
                match i.groups.by_mlid(mlid) {
                    Some(g) => {
                        let tree = planner.tree(mlid, &g.tree_members());
                        if !tree.unreachable.is_empty() {
                            tracing::debug!(%mlid, ports = tree.unreachable.len(), "multicast members the tree does not reach");
                        }
                        if tree.fallback {
                            tracing::warn!(%mlid, "multicast tree could not keep the up/down order");
                        }
                        want.apply(&tree);
                    }
                    None => want.clear(mlid),
                }
            }
            self.want = Some(want);
            out.recomputed = true;
        }
        let Some(want) = &self.want else {
            return out;
        };
        let known = |g: Guid| i.model.fabric.node_by_guid(g).is_some();
        let diff = want.diff(&self.sent);
        for u in diff.blocks.iter().filter(|u| known(u.guid)) {
            out.sets.push(McastSet::Block {
                guid: u.guid,
                modifier: u.modifier,
                block: u.block,
            });
        }
        out.blocks = out.sets.len();
        if i.use_top {
            for t in &want.switches {
                let top = t.top().unwrap_or(NO_MLID_TOP);
                let Some(n) = i.model.fabric.node_by_guid(t.guid) else {
                    continue;
                };
                let Some(info) = i.model.nodes[n].switch_info else {
                    continue;
                };
                if !has_top(i.model, t.guid) || self.top_sent.get(&t.guid) == Some(&top) {
                    continue;
                }
                out.sets.push(McastSet::Top {
                    guid: t.guid,
                    top,
                    info,
                });
            }
        }
        for s in &out.sets {
            match s {
                McastSet::Block {
                    guid,
                    modifier,
                    block,
                } => self.record_block(i.model, *guid, *modifier, block),
                McastSet::Top { guid, top, .. } => {
                    self.top_sent.insert(*guid, *top);
                    *self.in_flight.entry(*guid).or_default() += 1;
                }
            }
        }
        out
    }

    /// A block goes out.
    fn record_block(&mut self, m: &Discovered, guid: Guid, md: mft::Modifier, block: &mft::Repr) {
        let ports = m
            .fabric
            .node_by_guid(guid)
            .map_or(0, |n| m.fabric.node(n).num_ports);
        let t = match self.sent.switches.iter().position(|t| t.guid == guid) {
            Some(i) => &mut self.sent.switches[i],
            None => {
                self.sent.switches.push(SwitchMft::new(guid, ports));
                let last = self.sent.switches.len() - 1;
                &mut self.sent.switches[last]
            }
        };
        t.set_block(md, block);
        *self.in_flight.entry(guid).or_default() += 1;
    }
}
