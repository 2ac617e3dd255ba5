//! Multicast forwarding: the SA's groups become a spanning tree each (sm-routing's
//! [`McastPlanner`], in the unicast engine's up/down order so multicast adds no credit
//! loop), and the switches' MFTs are programmed with only the (block, position) pairs that
//! differ from what each switch holds.
//!
//! A heavy sweep recomputes every group once the ports are ACTIVE and the SA has its new
//! snapshot (the partitions' IPoIB groups exist by then). Between sweeps the joins and
//! leaves of one millisecond recompute their groups alone and send their blocks together
//! (OpenSM recomputes when it processes a join). A switch that advertises IsMulticastFDBTopSupported on
//! port 0 also gets SwitchInfo.MulticastFDBTop (0xBFFF when it holds no group), as OpenSM's
//! `use_mfttop` does.

use std::collections::HashMap;

use sm_mad::{Guid, Lid, attr, mft, port_info, switch_info};
use sm_routing::mcast::SwitchMft;
use sm_routing::{McastPlanner, Mfts, Topo, TreeOrder};

use super::{Nanos, PlannedSet, Purpose, Sm};

/// MulticastFDBTop of a switch that holds no group: below every MLID.
const NO_MLID_TOP: Lid = Lid(0xBFFF);

/// What the core needs to reach a switch between sweeps.
#[derive(Debug, Clone)]
pub(super) struct SwitchAddr {
    pub(super) path: Vec<u8>,
    pub(super) info: switch_info::Repr,
    pub(super) num_ports: u8,
    /// Port 0 advertises IsMulticastFDBTopSupported.
    pub(super) has_top: bool,
}

/// Multicast state of the core.
#[derive(Debug)]
pub(super) struct McastState {
    /// The tables the groups call for, in the last snapshot's switch order.
    pub(super) want: Option<Mfts>,
    /// What each switch holds once the Sets sent to it land (by GUID). Diffs are taken
    /// against this, not against confirmed state, so a change that undoes one still in
    /// flight is sent too; a Set refused or lost makes the switch unknown again.
    pub(super) sent: Mfts,
    /// MulticastFDBTop each switch holds once the Sets sent land.
    pub(super) top_sent: HashMap<Guid, Lid>,
    /// Multicast Sets in flight per switch.
    pub(super) in_flight: HashMap<Guid, u32>,
    /// Switches of the last heavy sweep.
    pub(super) switches: HashMap<Guid, SwitchAddr>,
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
            switches: HashMap::new(),
        }
    }
}

impl McastState {
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

    /// A block goes out.
    fn record_block(&mut self, guid: Guid, m: mft::Modifier, block: &mft::Repr) {
        let ports = self.switches.get(&guid).map_or(0, |s| s.num_ports);
        let t = match self.sent.switches.iter().position(|t| t.guid == guid) {
            Some(i) => &mut self.sent.switches[i],
            None => {
                self.sent.switches.push(SwitchMft::new(guid, ports));
                let last = self.sent.switches.len() - 1;
                &mut self.sent.switches[last]
            }
        };
        t.set_block(m, block);
        *self.in_flight.entry(guid).or_default() += 1;
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
}

/// A switch's directed route and SwitchInfo, remembered for programming between sweeps.
pub(super) fn switch_addr(
    path: &[u8],
    info: switch_info::Repr,
    num_ports: u8,
    port0: Option<&port_info::Repr>,
) -> SwitchAddr {
    SwitchAddr {
        path: path.to_vec(),
        info,
        num_ports,
        has_top: port0.is_some_and(|p| {
            p.capability_mask & port_info::cap::IS_MULTICAST_FDB_TOP_SUPPORTED != 0
        }),
    }
}

impl Sm {
    /// Recomputes the multicast trees (every group when `all`, else the groups the SA
    /// changed) and sends the MFT blocks and tops that differ from what the switches hold.
    /// Returns how many Sets went out.
    pub(super) fn sync_mcast(&mut self, now: Nanos, all: bool) -> usize {
        let changed = self.sa.take_mcast_changes();
        let Some(fabric) = &self.fabric else {
            return 0;
        };
        // The wanted tables follow the fabric of the last heavy sweep, which recomputes all.
        let fresh = all || self.mcast.want.is_none();
        let recompute = fresh || !changed.is_empty();
        if recompute {
            let topo = match Topo::new(fabric) {
                Ok(t) => t,
                Err(e) => {
                    tracing::warn!("multicast: no snapshot of the fabric: {e}");
                    return 0;
                }
            };
            let order =
                TreeOrder::for_engine(&topo, &self.report.engine_used, &self.p.routing_options)
                    .unwrap_or(TreeOrder::Free);
            let mut planner = McastPlanner::new(&topo, order);
            let mut want = match self.mcast.want.take() {
                Some(w) if !fresh => w,
                _ => Mfts::new(&topo),
            };
            let groups = self.sa.mcast();
            let mlids: Vec<Lid> = if fresh {
                groups.groups().map(|g| g.mlid).collect()
            } else {
                changed.iter().copied().collect()
            };
            for mlid in mlids {
                match groups.by_mlid(mlid) {
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
            self.mcast.want = Some(want);
        }
        let Some(want) = &self.mcast.want else {
            return 0;
        };
        let diff = want.diff(&self.mcast.sent);
        let mut sets: Vec<PlannedSet> = Vec::new();
        for u in &diff.blocks {
            let Some(sw) = self.mcast.switches.get(&u.guid) else {
                continue;
            };
            let mut data = [0u8; 64];
            if u.block.emit(&mut data).is_err() {
                continue;
            }
            sets.push((
                Purpose::SetMft {
                    guid: u.guid,
                    modifier: u.modifier,
                    block: u.block,
                },
                attr::MULTICAST_FORWARDING_TABLE,
                u.modifier.to_attr_mod(),
                sw.path.clone(),
                data,
            ));
        }
        if self.p.sa.mcast_top {
            for t in &want.switches {
                let Some(sw) = self.mcast.switches.get(&t.guid) else {
                    continue;
                };
                let top = t.top().unwrap_or(NO_MLID_TOP);
                if !sw.has_top || self.mcast.top_sent.get(&t.guid) == Some(&top) {
                    continue;
                }
                let si = switch_info::Repr {
                    multicast_fdb_top: top,
                    // Writing 1 would clear the change bit the light sweep polls.
                    port_state_change: false,
                    ..sw.info
                };
                let mut data = [0u8; 64];
                if si.emit(&mut data).is_ok() {
                    sets.push((
                        Purpose::SetMcastTop { guid: t.guid, top },
                        attr::SWITCH_INFO,
                        0,
                        sw.path.clone(),
                        data,
                    ));
                }
            }
        }
        // The SA's MFTRecords show what the switches are told.
        if recompute {
            self.publish_mfts();
        }
        let n = sets.len();
        self.report.mft_blocks_sent += diff.blocks.len() as u64;
        if matches!(self.phase, super::Phase::Program(_)) {
            self.report.mcast_sets += n as u64;
        }
        for (purpose, ..) in &sets {
            match *purpose {
                Purpose::SetMft {
                    guid,
                    modifier,
                    ref block,
                } => self.mcast.record_block(guid, modifier, block),
                Purpose::SetMcastTop { guid, top } => {
                    self.mcast.top_sent.insert(guid, top);
                    *self.mcast.in_flight.entry(guid).or_default() += 1;
                }
                _ => {}
            }
        }
        self.submit_sets(now, sets);
        if n > 0 {
            tracing::debug!(sets = n, "multicast forwarding tables updated");
        }
        n
    }

    /// Copies the wanted MFTs into the SA's snapshot.
    fn publish_mfts(&mut self) {
        let (Some(want), Some(fabric)) = (&self.mcast.want, &self.fabric) else {
            return;
        };
        let Some(db) = self.sa.db_mut() else {
            return;
        };
        for t in &want.switches {
            let Some(node) = fabric.node_by_guid(t.guid) else {
                continue;
            };
            db.clear_mft(node);
            for b in 0..t.blocks() {
                for pos in 0..t.positions() {
                    let block = t.block(b, pos);
                    if block.port_mask_block.iter().any(|&w| w != 0) {
                        db.set_mft(node, b, pos, block);
                    }
                }
            }
        }
    }

    /// A multicast Set answered (`ok`: accepted) or lost.
    pub(super) fn on_mcast_answer(&mut self, purpose: &Purpose, ok: bool) {
        match *purpose {
            Purpose::SetMft { guid, modifier, .. } => {
                if !ok {
                    tracing::warn!(%guid, block = modifier.block, position = modifier.position, "MFT block refused or lost; the switch's table is sent again");
                }
                self.mcast.settle(guid, ok);
            }
            Purpose::SetMcastTop { guid, top } => {
                if !ok {
                    tracing::warn!(%guid, %top, "MulticastFDBTop refused or lost");
                }
                self.mcast.settle(guid, ok);
            }
            _ => {}
        }
    }
}
