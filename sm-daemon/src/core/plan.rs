//! The planner: what the fabric should hold, as a pure function of what was discovered,
//! the configuration and the LID store. No I/O, no clock (the routing time is measured
//! only when the parameters carry a stopwatch), so it is unit-tested on its own.
//!
//! A [`Plan`] has the LIDs (in its copy of the topology), the forwarding table of every
//! switch, the PortInfo every port should hold, and the P_Key, SL-to-VL and VL arbitration
//! blocks. Programming sends only what differs from what the nodes hold.

use std::sync::Arc;
use std::time::Duration;

use sm_core::dump::{Lfts, SwitchLft};
use sm_core::fabric::{Fabric, NodeIdx, NodeKind, PortIdx};
use sm_core::idx::{IdxVec, OptIdx};
use sm_core::lid::{LidError, LidStore};
use sm_core::partitions::{PKeyTables, pkey_tables_with};
use sm_core::qos::{self, PortKind};
use sm_mad::port_info::{self, Mtu, VlCap};
use sm_mad::{Lid, PortNum, attr, lft, sl2vl, vl_arb};
use sm_routing::{RouteError, Routes, SwIdx, Topo, TopoError};

use super::Params;
use super::model::Discovered;

/// Why no plan could be made.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    #[error("LID assignment: {0}")]
    Lids(#[from] LidError),
    #[error("routing snapshot: {0}")]
    Snapshot(#[from] TopoError),
    #[error("routing: {0}")]
    Routing(#[from] RouteError),
}

/// A P_Key, SL-to-VL or VL arbitration block for one port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableBlock {
    /// The port addressed (its agent is where the Set goes).
    pub port: PortIdx,
    pub attr: u16,
    pub modifier: u32,
    pub data: [u8; 64],
}

/// What the subnet should hold.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The discovered topology with the LIDs to give every end port.
    pub fabric: Fabric,
    /// Forwarding tables of the switches, in the routing snapshot's order.
    pub routes: Arc<Routes>,
    /// The switch behind each routing table (`routes.lft[i]` is `switches[i]`'s).
    pub switches: Vec<NodeIdx>,
    /// A node's routing table, if it is a switch.
    pub sw_of: IdxVec<NodeIdx, OptIdx<SwIdx>>,
    /// LinearFDBTop of every switch.
    pub max_lid: Lid,
    /// LIDs in use (every LID of every LMC range).
    pub lids: usize,
    /// The LID store changed (new ports, new LMC): it should be persisted.
    pub lids_changed: bool,
    pub engine_used: String,
    /// Engines of the chain that declined, with why.
    pub fallbacks: Vec<String>,
    /// Adaptive-routing hints in their dump format, when asked for.
    pub ar_hints: Option<String>,
    /// Wall time of the routing run (zero without a stopwatch).
    pub routing_time: Duration,
    /// The PortInfo each port should hold; `None` where the port's own is unknown.
    pub settings: IdxVec<PortIdx, Option<port_info::Repr>>,
    /// P_Key, SL2VL and VLArb blocks, in port order.
    pub tables: Vec<TableBlock>,
    pub pkeys: PKeyTables,
}

impl Plan {
    /// The forwarding table a switch should hold, index = LID.
    pub fn lft(&self, n: NodeIdx) -> Option<&[u8]> {
        let s = self.sw_of.get(n)?.get()?;
        self.routes.lft.get(s.idx()).map(Vec::as_slice)
    }

    /// Block `b` of switch `n`'s table (entries past the table's end unrouted).
    pub fn lft_block(&self, n: NodeIdx, b: usize) -> Option<[u8; lft::ENTRIES]> {
        let t = self.lft(n)?;
        let chunk = t.get(b * lft::ENTRIES..)?;
        let mut block = [lft::NO_ROUTE.0; lft::ENTRIES];
        let len = chunk.len().min(lft::ENTRIES);
        block[..len].copy_from_slice(&chunk[..len]);
        Some(block)
    }

    /// Blocks in switch `n`'s table.
    pub fn lft_blocks(&self, n: NodeIdx) -> usize {
        self.lft(n).map_or(0, |t| t.len().div_ceil(lft::ENTRIES))
    }

    /// A plan of tables made elsewhere (read from dumps, or built for a benchmark): the
    /// switches' forwarding tables and the P_Key tables; no port settings.
    pub fn from_tables(fabric: Fabric, lfts: Vec<(NodeIdx, Vec<u8>)>, pkeys: PKeyTables) -> Plan {
        let mut sw_of = IdxVec::filled(OptIdx::NONE, fabric.nodes().len());
        let mut switches = Vec::with_capacity(lfts.len());
        let mut lft = Vec::with_capacity(lfts.len());
        for (n, table) in lfts {
            if sw_of.get(n).is_some_and(|s: &OptIdx<SwIdx>| s.is_none()) {
                sw_of[n] = OptIdx::some(SwIdx(switches.len() as u32));
                switches.push(n);
                lft.push(table);
            }
        }
        let max_lid = Lid(lft
            .iter()
            .map(|t| t.len().saturating_sub(1))
            .max()
            .unwrap_or(0) as u16);
        Plan {
            routes: Arc::new(Routes {
                engine: "external",
                lft,
                ar: None,
            }),
            switches,
            sw_of,
            max_lid,
            lids: 0,
            lids_changed: false,
            engine_used: "external".into(),
            fallbacks: Vec::new(),
            ar_hints: None,
            routing_time: Duration::ZERO,
            settings: IdxVec::filled(None, fabric.ports().len()),
            tables: Vec::new(),
            pkeys,
            fabric,
        }
    }

    /// The tables in the dump formats' exchange type (a copy: for dumps and offline use).
    pub fn to_lfts(&self) -> Lfts {
        let mut out = Lfts::new();
        for (i, &n) in self.switches.iter().enumerate() {
            let mut t = SwitchLft::for_switch(&self.fabric, n, Lid(0));
            t.ports = self.routes.lft.get(i).cloned().unwrap_or_default();
            out.switches.push(t);
        }
        out
    }

    /// The LID of port `p` (its switch's, for a switch port) in this plan.
    pub fn lid_of(&self, p: PortIdx) -> Lid {
        self.fabric.port(self.fabric.lid_port(p)).lid
    }
}

/// Plans the subnet: LIDs (remembered, then held, then fresh), routes (the engine chain;
/// minhop when every engine declines, as OpenSM falls back), the PortInfo of every port
/// and the table blocks. `previous` keeps routes that are still legal where they are.
pub fn plan(
    d: &Discovered,
    lids: &mut LidStore,
    p: &Params,
    previous: Option<&Plan>,
) -> Result<Plan, PlanError> {
    let mut fabric = d.fabric.clone();
    let before = lids.clone();
    lids.assign(&mut fabric, p.lmc)?;
    let lids_changed = *lids != before;

    let t0 = p.stopwatch.map(|f| f());
    let routed = route(&fabric, p, previous)?;
    let routing_time = match (t0, p.stopwatch) {
        (Some(t0), Some(f)) => Duration::from_nanos(f().saturating_sub(t0)),
        _ => Duration::ZERO,
    };

    let own_lid = fabric.port(fabric.lid_port(d.own)).lid;
    let mut settings = port_settings(d, &fabric, own_lid, p);
    let (tables, pkeys) = tables(d, &fabric, &mut settings, p);
    Ok(Plan {
        routes: Arc::new(routed.routes),
        switches: routed.switches,
        sw_of: routed.sw_of,
        max_lid: routed.max_lid,
        lids: routed.lids,
        lids_changed,
        engine_used: routed.engine_used,
        fallbacks: routed.fallbacks,
        ar_hints: routed.ar_hints,
        routing_time,
        settings,
        tables,
        pkeys,
        fabric,
    })
}

struct Routed {
    routes: Routes,
    switches: Vec<NodeIdx>,
    sw_of: IdxVec<NodeIdx, OptIdx<SwIdx>>,
    max_lid: Lid,
    lids: usize,
    engine_used: String,
    fallbacks: Vec<String>,
    ar_hints: Option<String>,
}

fn route(fabric: &Fabric, p: &Params, previous: Option<&Plan>) -> Result<Routed, PlanError> {
    let mut sw_of = IdxVec::filled(OptIdx::NONE, fabric.nodes().len());
    if fabric.switches().next().is_none() {
        // End ports cabled to each other with no switch between: nothing to route.
        let lids = fabric
            .end_ports()
            .filter(|&q| fabric.port(q).lid.0 != 0)
            .map(|q| 1usize << fabric.port(q).lmc)
            .sum();
        return Ok(Routed {
            routes: Routes {
                engine: "none",
                lft: Vec::new(),
                ar: None,
            },
            switches: Vec::new(),
            sw_of,
            max_lid: Lid(0),
            lids,
            engine_used: "none".into(),
            fallbacks: Vec::new(),
            ar_hints: None,
        });
    }
    let topo = Topo::new(fabric)?;
    let mut opts = p.routing_options.clone();
    if p.sticky_routes {
        opts.previous = previous.map(|pl| {
            let guids = pl
                .switches
                .iter()
                .map(|&n| pl.fabric.node(n).guid)
                .collect();
            Arc::new(sm_routing::PreviousTables::from_routes(
                guids,
                Arc::clone(&pl.routes),
            ))
        });
    }
    let chain = match sm_routing::route_chain(&p.routing, &topo, &opts) {
        Err(RouteError::ChainExhausted(why)) => {
            tracing::warn!(
                "no engine of {} could route ({why}); using minhop",
                p.routing
            );
            let mut r = sm_routing::route_chain("minhop", &topo, &opts)?;
            r.fallbacks.insert(
                0,
                sm_routing::engine::Fallback {
                    engine: "chain",
                    reason: why,
                },
            );
            r
        }
        other => other?,
    };
    let ar_hints = chain.routes.ar.as_ref().map(|_| {
        let mut out = Vec::new();
        // Writing into memory cannot fail.
        let _ = sm_routing::ar::write_ar(&chain.routes, &topo, &mut out);
        String::from_utf8_lossy(&out).into_owned()
    });
    for (i, &n) in topo.switches.iter().enumerate() {
        sw_of[n] = OptIdx::some(SwIdx(i as u32));
    }
    Ok(Routed {
        engine_used: chain.routes.engine.to_string(),
        fallbacks: chain
            .fallbacks
            .iter()
            .map(|f| format!("{}: {}", f.engine, f.reason))
            .collect(),
        ar_hints,
        switches: topo.switches.clone(),
        sw_of,
        max_lid: topo.max_lid(),
        lids: topo.dests.iter().map(|d| 1usize << d.lmc).sum(),
        routes: chain.routes,
    })
}

/// The PortInfo each port with a known PortInfo should hold: LIDs, SM LID, prefix, M_Key
/// and timeouts on end ports; NeighborMTU, OperationalVLs and HOQLife on linked ports.
fn port_settings(
    d: &Discovered,
    fabric: &Fabric,
    own_lid: Lid,
    p: &Params,
) -> IdxVec<PortIdx, Option<port_info::Repr>> {
    let mut out = IdxVec::filled(None, d.ports.len());
    for (q, facts) in d.ports.iter_enumerated() {
        let Some(cur) = facts.info else { continue };
        let mut want = cur;
        if d.is_end_port(q) {
            let port = fabric.port(q);
            want.lid = port.lid;
            want.lmc = port.lmc;
            want.master_sm_lid = own_lid;
            want.gid_prefix = p.subnet_prefix;
            want.m_key = p.m_key;
            want.subnet_timeout = p.subnet_timeout;
        }
        if let Some(r) = fabric.port(q).remote {
            if let Some(peer) = d.port_info(r) {
                let mtu = cur.mtu_cap.to_raw_value().min(peer.mtu_cap.to_raw_value());
                want.neighbor_mtu = Mtu::from_raw_value(mtu);
                let vls = cur
                    .vl_cap
                    .to_raw_value()
                    .min(peer.vl_cap.to_raw_value())
                    .min(p.max_op_vls)
                    .max(1);
                want.operational_vls = VlCap::from_raw_value(vls);
                if d.is_switch(fabric.port(q).node) {
                    want.hoq_life = if d.is_switch(fabric.port(r).node) {
                        p.hoq_life
                    } else {
                        p.leaf_hoq_life
                    };
                }
            }
        }
        out[q] = Some(want);
    }
    out
}

/// An attribute as SMP data.
pub(super) fn emit_data<W: sm_mad::Wire>(w: &W) -> Option<[u8; 64]> {
    let mut data = [0u8; 64];
    w.emit(&mut data).ok().map(|_| data)
}

/// P_Key tables from the partitions, SL-to-VL and VL arbitration tables from QoS; the
/// PortInfo bits that go with them (enforcement, VLHighLimit) are set in `settings`.
fn tables(
    d: &Discovered,
    fabric: &Fabric,
    settings: &mut IdxVec<PortIdx, Option<port_info::Repr>>,
    p: &Params,
) -> (Vec<TableBlock>, PKeyTables) {
    let mut out = Vec::new();
    let parts = pkey_tables_with(
        &p.partitions,
        fabric,
        fabric.port(d.own).guid,
        &p.pkey_options,
    );
    for (list, external) in [(&parts.end_ports, false), (&parts.switch_ports, true)] {
        for pk in list {
            let node = fabric.port(pk.port).node;
            let facts = &d.nodes[node];
            let cap = if external {
                facts.switch_info.map_or(0, |s| s.partition_enforcement_cap)
            } else {
                facts.info.partition_cap
            };
            let (blocks, dropped) = pk.blocks(cap);
            if !dropped.is_empty() {
                tracing::warn!(
                    node = %facts.info.node_guid,
                    port = pk.num,
                    dropped = dropped.len(),
                    "P_Key table larger than the port holds"
                );
                if external {
                    // As OpenSM does: no enforcement where the table does not fit.
                    continue;
                }
            }
            let port_bits = if d.is_switch(node) {
                u32::from(pk.num) << 16
            } else {
                0
            };
            for (b, block) in blocks.iter().enumerate() {
                if let Some(data) = emit_data(block) {
                    out.push(TableBlock {
                        port: pk.port,
                        attr: attr::P_KEY_TABLE,
                        modifier: b as u32 | port_bits,
                        data,
                    });
                }
            }
            if external {
                if let Some(w) = settings[pk.port].as_mut() {
                    let (inb, outb) = parts.enforcement.bits();
                    w.partition_enforcement_inbound = inb;
                    w.partition_enforcement_outbound = outb;
                }
            }
        }
    }
    if p.qos.enabled {
        qos_tables(d, settings, p, &mut out);
    }
    (out, parts)
}

fn qos_tables(
    d: &Discovered,
    settings: &mut IdxVec<PortIdx, Option<port_info::Repr>>,
    p: &Params,
    out: &mut Vec<TableBlock>,
) {
    let f = &d.fabric;
    for (i, node) in f.nodes().iter().enumerate() {
        let n = NodeIdx(i as u32);
        let linked: Vec<PortIdx> = f
            .node_ports(n)
            .filter(|&q| f.port(q).num != 0 && f.port(q).remote.is_some())
            .collect();
        let kind = match node.kind {
            NodeKind::Switch => PortKind::SwitchExternal,
            NodeKind::Router => PortKind::Router,
            NodeKind::Ca => PortKind::Ca,
        };
        for &o in &linked {
            let Some(w) = settings[o].as_mut() else {
                continue;
            };
            let onum = f.port(o).num;
            let t = qos::tables(&p.qos, kind, w.operational_vls);
            w.vl_high_limit = t.high_limit;
            if let Some(data) = emit_data(&sl2vl::Repr::new(t.sl2vl)) {
                if node.kind == NodeKind::Switch {
                    for &i in &linked {
                        let inum = f.port(i).num;
                        out.push(TableBlock {
                            port: o,
                            attr: attr::SL_TO_VL_MAPPING_TABLE,
                            modifier: (u32::from(inum) << 8) | u32::from(onum),
                            data,
                        });
                    }
                } else {
                    out.push(TableBlock {
                        port: o,
                        attr: attr::SL_TO_VL_MAPPING_TABLE,
                        modifier: 0,
                        data,
                    });
                }
            }
            if qos::QosTables::needs_vlarb(w.vl_cap) {
                for block in vl_arb::Block::ALL {
                    let Some(r) =
                        t.vlarb_block(block, w.vl_arbitration_low_cap, w.vl_arbitration_high_cap)
                    else {
                        continue;
                    };
                    let port_bits = if node.kind == NodeKind::Switch {
                        onum
                    } else {
                        0
                    };
                    let m = vl_arb::Modifier::switch_port(PortNum(port_bits), block);
                    if let Some(data) = emit_data(&r) {
                        out.push(TableBlock {
                            port: o,
                            attr: attr::VL_ARBITRATION_TABLE,
                            modifier: m.to_attr_mod(),
                            data,
                        });
                    }
                }
            }
        }
    }
}
