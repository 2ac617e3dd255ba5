//! The data-path tracer: follows a data packet through the tables the simulated fabric holds
//! right now (LIDs, LFTs, MFTs, port states, P_Key tables, SL-to-VL tables,
//! OperationalVLs), hop by hop, as the hardware would forward it, and says where and why it
//! dies when it does not arrive.
//!
//! - [`Sim::trace`]: one packet (source LID, destination LID, SL, P_Key) -> [`Path`] or
//!   [`Dropped`].
//! - [`Sim::trace_adaptive`]: the same with adaptive-routing port groups
//!   ([`SwitchAr`]); a flow picks among a group's usable ports by a hash of the flow.
//! - [`Sim::check_all_pairs`] / [`Sim::check_all_pairs_adaptive`]: every CA port to every
//!   LID of every CA port, counted by outcome ([`AllPairs`]).
//! - [`Sim::trace_multicast`]: the copies of a multicast packet through the MFTs
//!   ([`Multicast`]).
//!
//! Build a [`Tracer`] once to trace many packets over one snapshot: it copies what the hot
//! paths read into compact arrays (a few bytes per port), so the cost of a trace is a handful
//! of cache lines per hop.
//!
//! # The rules, in the order they are checked
//!
//! 1. The source LID must belong to an end port (a CA or router port, or a switch's port 0),
//!    else [`Dropped::UnknownSource`]; the destination must be a unicast LID (multicast for
//!    [`Sim::trace_multicast`]), else [`Dropped::BadDestination`].
//! 2. The source port must be ACTIVE (switch port 0 always is).
//! 3. The source port's P_Key table must hold the packet's partition (either membership).
//!    The packet carries the source's own entry: full when the table holds the full key.
//! 4. A packet to one of the source's own LIDs is delivered at once (loopback).
//! 5. Every link crossed needs both ends ACTIVE (and physically up, on a live node).
//! 6. The VL of each link comes from the SL-to-VL table of the sending CA port, or of the
//!    switch for (input port, output port); a switch's own packets use input port 0. VL15
//!    drops the packet; a VL needs OperationalVLs of both ends of the link to cover it (VL
//!    `n` needs `n + 1` data VLs).
//! 7. At a switch: inbound partition enforcement of the input port (when set), delivery to
//!    port 0 when it owns the LID, the LFT entry (LIDs above LinearFDBTop, entries 0 and
//!    255 and ports beyond NumPorts have none), outbound enforcement of the output port.
//!    A switch port's table passes a packet when it holds the partition and at least one of
//!    packet and entry is a full member.
//! 8. More than [`MAX_HOPS`] links, or a switch reached twice, is a loop.
//! 9. The port the packet finally reaches must own the destination LID, and its P_Key table
//!    must hold the partition with at least one of the two ends a full member.
//!
//! # Adaptive routing
//!
//! The hints are `sm_routing`'s [`SwitchAr`], one per switch in the order of
//! `sm_routing::Topo::switches` (switch nodes in fabric order, which is also the simulator's
//! node order); missing entries mean no hints. sm-sim depends on sm-routing for this type
//! (and for the test kit), which keeps the layering linear: sm-mad < sm-core < sm-routing <
//! sm-sim < sm-daemon; sm-routing knows nothing of the simulator. At a switch with a group
//! for the destination LID, a flow takes the `h mod k`-th of the group's `k` ports whose
//! links are ACTIVE at both ends, `h` a hash of (flow id, source LID, destination LID,
//! switch GUID); with no usable port in the group, the LFT's port. The LFT entry must still
//! exist (an SM programs the static route besides the groups).
//!
//! # All pairs, fast
//!
//! For one destination LID (with SL and, when no switch enforces partitions, any P_Key) the
//! fate of a packet once it has left a switch through its LFT port depends on that switch
//! only. The checker memoises it per switch (a forwarding graph with out-degree one, so a
//! cycle is found as a switch met again while its own outcome is being worked out); a pair
//! then costs the source's first link, the first switch's checks and one lookup.
//! Destinations are shared out over rayon's threads; counts are sums and the kept failures
//! the first ones in (destination, source) order, so the result does not depend on the
//! number of threads. The memoised outcome counts as the single trace's (a test compares
//! both on broken fabrics); the details of each kept failure come from a single trace.
//!
//! # Multicast
//!
//! Copies follow the MFT entry of every switch they reach (every port in the mask but the
//! one they came in on); port 0 in a mask delivers to the switch itself. VLs and P_Keys are
//! not checked for multicast. A switch reached twice is a loop (its copies are not sent
//! again); a switch without an entry (no table, above a non-zero MulticastFDBTop, or an
//! empty mask) drops. MulticastFDBTop 0 means the switch does not use the top.

use rayon::prelude::*;
use serde::Serialize;
use sm_core::fabric::{NodeIdx, NodeKind, PortIdx};
use sm_core::idx::{IdxVec, OptIdx};
use sm_mad::port_info::{PhysPortState, PortState};
use sm_mad::{Guid, Lid, PKey, Sl, Vl};
use sm_routing::{SwIdx, SwitchAr};

use crate::sim::{MAX_HOPS, Sim};
/// Port flags in the compact snapshot.
const UP: u8 = 1;
const ENF_IN: u8 = 2;
const ENF_OUT: u8 = 4;
/// A CA or router port, or a switch's port 0.
const END: u8 = 8;

/// One hop of a delivered packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Hop {
    /// The node the packet leaves.
    pub node: Guid,
    /// The port it came in on (0 at the source).
    pub in_port: u8,
    /// The port it leaves through.
    pub out_port: u8,
    /// The VL on the outgoing link.
    pub vl: Vl,
}

/// The way a packet took.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Path {
    /// One entry per link crossed, source first (empty for loopback).
    pub hops: Vec<Hop>,
    /// The node that took the packet in.
    pub dest_node: Guid,
    /// Its port that owns the destination LID (0 for a switch).
    pub dest_port: u8,
    /// The P_Key the packet carried (the source's entry for the partition).
    pub pkey: PKey,
}

/// Which P_Key check failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum PKeyCheck {
    /// The source's table does not hold the partition.
    SourceLacks,
    /// The destination's table does not hold the partition.
    DestinationLacks,
    /// Both ends are limited members.
    BothLimited,
    /// A switch input port with inbound enforcement refused it.
    SwitchInbound,
    /// A switch output port with outbound enforcement refused it.
    SwitchOutbound,
    /// Asked for the best shared P_Key: the two ends share no partition.
    NotShared,
}

/// Where and why a packet died.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, thiserror::Error)]
#[non_exhaustive]
pub enum Dropped {
    #[error("source LID {lid} is not held by any end port")]
    UnknownSource { lid: Lid },
    #[error("LID {lid} is not a destination of this kind (unicast or multicast)")]
    BadDestination { lid: Lid },
    #[error("switch {node} has no forwarding entry for LID {lid} (top {top})")]
    NoRoute { node: Guid, lid: Lid, top: Lid },
    #[error("forwarding loop at {node} after {hops} links")]
    Loop { node: Guid, hops: u32 },
    #[error("port {port} of {node} is {state:?}, not ACTIVE")]
    PortNotActive {
        node: Guid,
        port: u8,
        #[serde(serialize_with = "state_name")]
        state: PortState,
    },
    #[error("P_Key {pkey} refused at {node} port {port}: {check:?}")]
    PKey {
        node: Guid,
        port: u8,
        pkey: PKey,
        check: PKeyCheck,
    },
    #[error("SL {sl} maps to VL15 at {node} (in {in_port}, out {out_port})")]
    Vl15 {
        node: Guid,
        in_port: u8,
        out_port: u8,
        sl: u8,
    },
    #[error("VL {vl} is beyond the {data_vls} operational data VLs of {node} port {port}")]
    VlNotOperational {
        node: Guid,
        port: u8,
        vl: u8,
        data_vls: u8,
    },
    #[error("LID {lid} arrived at {node} port {port}, which does not own it")]
    WrongLid { node: Guid, port: u8, lid: Lid },
}

fn state_name<S: serde::Serializer>(s: &PortState, ser: S) -> Result<S::Ok, S::Error> {
    match s.name() {
        Some(n) => ser.serialize_str(n),
        None => ser.serialize_u8(s.to_raw_value()),
    }
}

/// The reason of a [`Dropped`] without its location, for counting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum DropReason {
    UnknownSource,
    BadDestination,
    NoRoute,
    Loop,
    PortNotActive,
    PKey,
    Vl15,
    VlNotOperational,
    WrongLid,
}

impl Dropped {
    /// The reason alone.
    pub fn reason(&self) -> DropReason {
        match self {
            Dropped::UnknownSource { .. } => DropReason::UnknownSource,
            Dropped::BadDestination { .. } => DropReason::BadDestination,
            Dropped::NoRoute { .. } => DropReason::NoRoute,
            Dropped::Loop { .. } => DropReason::Loop,
            Dropped::PortNotActive { .. } => DropReason::PortNotActive,
            Dropped::PKey { .. } => DropReason::PKey,
            Dropped::Vl15 { .. } => DropReason::Vl15,
            Dropped::VlNotOperational { .. } => DropReason::VlNotOperational,
            Dropped::WrongLid { .. } => DropReason::WrongLid,
        }
    }
}

/// Dropped pairs per reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DropCounts {
    pub unknown_source: u64,
    pub bad_destination: u64,
    pub no_route: u64,
    pub loops: u64,
    pub port_not_active: u64,
    pub pkey: u64,
    pub vl15: u64,
    pub vl_not_operational: u64,
    pub wrong_lid: u64,
}

impl DropCounts {
    fn slot(&mut self, r: DropReason) -> &mut u64 {
        match r {
            DropReason::UnknownSource => &mut self.unknown_source,
            DropReason::BadDestination => &mut self.bad_destination,
            DropReason::NoRoute => &mut self.no_route,
            DropReason::Loop => &mut self.loops,
            DropReason::PortNotActive => &mut self.port_not_active,
            DropReason::PKey => &mut self.pkey,
            DropReason::Vl15 => &mut self.vl15,
            DropReason::VlNotOperational => &mut self.vl_not_operational,
            DropReason::WrongLid => &mut self.wrong_lid,
        }
    }

    /// The count of one reason.
    pub fn get(&self, r: DropReason) -> u64 {
        let mut c = *self;
        *c.slot(r)
    }

    /// Every dropped pair.
    pub fn total(&self) -> u64 {
        self.unknown_source
            + self.bad_destination
            + self.no_route
            + self.loops
            + self.port_not_active
            + self.pkey
            + self.vl15
            + self.vl_not_operational
            + self.wrong_lid
    }

    fn merge(&mut self, o: &DropCounts) {
        for r in ALL_REASONS {
            *self.slot(r) += o.get(r);
        }
    }
}

const ALL_REASONS: [DropReason; 9] = [
    DropReason::UnknownSource,
    DropReason::BadDestination,
    DropReason::NoRoute,
    DropReason::Loop,
    DropReason::PortNotActive,
    DropReason::PKey,
    DropReason::Vl15,
    DropReason::VlNotOperational,
    DropReason::WrongLid,
];

/// Which P_Key the pairs of an all-pairs check use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum PKeyChoice {
    /// The same key for every pair.
    Fixed(PKey),
    /// Per pair, the partition both ends hold that lets them talk (one full member),
    /// preferring the source as full member, then the source's table order.
    BestShared,
}

/// What an all-pairs check does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct AllPairsOptions {
    /// The SL of every packet (default 0).
    pub sl: Sl,
    /// The P_Key (default: the full default partition 0xFFFF).
    pub pkey: PKeyChoice,
    /// Only the base LID of each destination port, not all its 2^LMC LIDs.
    pub base_lids_only: bool,
    /// How many failures to keep with their details (default 16).
    pub max_failures: usize,
    /// Count the flows leaving every port (always on in adaptive mode; costs a walk per
    /// pair instead of the memoised check).
    pub link_load: bool,
    /// Flow id of every pair in adaptive mode (mixed with the pair's LIDs).
    pub flow_id: u64,
}

impl Default for AllPairsOptions {
    fn default() -> Self {
        AllPairsOptions {
            sl: Sl(0),
            pkey: PKeyChoice::Fixed(PKey::DEFAULT),
            base_lids_only: false,
            max_failures: 16,
            link_load: false,
            flow_id: 0,
        }
    }
}

/// One pair that was not delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Failure {
    /// The source port's GUID.
    pub src_guid: Guid,
    pub src_lid: Lid,
    pub dst_lid: Lid,
    /// The P_Key tried (0 when none was shared).
    pub pkey: PKey,
    pub why: Dropped,
}

/// The outcome of an all-pairs check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AllPairs {
    /// Source CA ports × destination LIDs.
    pub pairs: u64,
    pub delivered: u64,
    pub dropped: DropCounts,
    /// Delivered pairs by links crossed (index = links).
    pub hops: Vec<u64>,
    /// The first failures in (destination, source) order, with details.
    pub failures: Vec<Failure>,
    /// Flows leaving each port, indexed by port slot (`PortIdx`); empty unless link load
    /// was asked for. Only delivered flows count.
    pub link_flows: Vec<u64>,
}

impl AllPairs {
    /// Every pair delivered.
    pub fn all_delivered(&self) -> bool {
        self.delivered == self.pairs
    }

    /// The longest delivered path, in links.
    pub fn max_hops(&self) -> usize {
        self.hops.iter().rposition(|&n| n > 0).unwrap_or(0)
    }
}

/// Where the copies of a multicast packet went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Multicast {
    /// End ports that received a copy (CA and router ports, switch ports 0), sorted.
    #[serde(skip)]
    pub reached: Vec<PortIdx>,
    /// The same as (port GUID, port number).
    pub reached_guids: Vec<(Guid, u8)>,
    /// Copies that died, in the order met (breadth first).
    pub drops: Vec<Dropped>,
    /// Links crossed by all copies.
    pub links: u32,
}

// ---------------------------------------------------------------------------------------
// The compact snapshot.

#[derive(Debug, Clone, Copy)]
struct PortLite {
    node: NodeIdx,
    remote: OptIdx<PortIdx>,
    lid: u16,
    lmc: u8,
    num: u8,
    flags: u8,
    data_vls: u8,
}

impl PortLite {
    #[inline]
    fn owns(&self, lid: u16) -> bool {
        let base = self.lid as u32;
        base != 0 && (lid as u32) >= base && (lid as u32) < base + (1u32 << self.lmc.min(7))
    }
}

#[derive(Debug, Clone, Copy)]
struct NodeLite {
    guid: Guid,
    /// The slot of port 0; port `p` is `first_port + p`.
    first_port: u32,
    num_ports: u8,
    /// Dense switch index; none for CAs and routers.
    sw: OptIdx<SwIdx>,
}

impl NodeLite {
    /// The slot of port `p`.
    #[inline]
    fn port(&self, p: u8) -> PortIdx {
        PortIdx(self.first_port + u32::from(p))
    }
}

#[derive(Debug, Clone, Copy)]
struct SwLite<'s> {
    node: NodeIdx,
    top: u16,
    lft: &'s [u8],
    sl2vl: &'s [[u8; 16]],
    mft: &'s [[u16; 16]],
    mtop: u16,
}

impl SwLite<'_> {
    #[inline]
    fn vl(&self, num_ports: u8, input: u8, output: u8, sl: u8) -> u8 {
        let n = num_ports as usize + 1;
        self.sl2vl
            .get(input as usize * n + output as usize)
            .map_or(0, |t| t[(sl & 15) as usize])
    }
}

/// A packet's invariant fields.
#[derive(Debug, Clone, Copy)]
struct Pkt {
    dlid: u16,
    sl: u8,
    key: PKey,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Memb {
    None,
    Limited,
    Full,
}

/// What a switch does with a packet that entered it.
#[derive(Debug, Clone, Copy)]
enum Fwd {
    /// Port 0 owns the LID.
    Deliver(PortIdx),
    /// Out through `out` on `vl`, arriving at `next`.
    Out { out: PortIdx, next: PortIdx, vl: u8 },
}

/// Receives the hops of a walk.
trait Sink {
    fn hop(&mut self, node: NodeIdx, in_port: u8, out: PortIdx, vl: u8);
}

struct NoSink;
impl Sink for NoSink {
    #[inline]
    fn hop(&mut self, _: NodeIdx, _: u8, _: PortIdx, _: u8) {}
}

/// Remembers the output ports of a walk (at most `MAX_HOPS`).
struct OutPorts {
    ports: [PortIdx; MAX_HOPS as usize + 1],
    n: usize,
}
impl Sink for OutPorts {
    #[inline]
    fn hop(&mut self, _: NodeIdx, _: u8, out: PortIdx, _: u8) {
        if let Some(slot) = self.ports.get_mut(self.n) {
            *slot = out;
            self.n += 1;
        }
    }
}

struct Recorder<'a, 't> {
    t: &'a Tracer<'t>,
    hops: Vec<Hop>,
}
impl Sink for Recorder<'_, '_> {
    fn hop(&mut self, node: NodeIdx, in_port: u8, out: PortIdx, vl: u8) {
        self.hops.push(Hop {
            node: self.t.nodes[node].guid,
            in_port,
            out_port: self.t.ports[out].num,
            vl: Vl(vl),
        });
    }
}

/// A read-only snapshot of a simulated fabric's forwarding state, for tracing many packets.
#[derive(Debug)]
pub struct Tracer<'s> {
    sim: &'s Sim,
    nodes: IdxVec<NodeIdx, NodeLite>,
    ports: IdxVec<PortIdx, PortLite>,
    sws: IdxVec<SwIdx, SwLite<'s>>,
    /// The first end port owning each LID (indexed by LID).
    lid_owner: Vec<OptIdx<PortIdx>>,
    any_enforcement: bool,
}

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The hash a flow chooses adaptive ports by (before mixing in the switch).
fn flow_hash(flow_id: u64, src: Lid, dst: Lid) -> u64 {
    mix(mix(flow_id) ^ (((src.0 as u64) << 16) | dst.0 as u64))
}

impl<'s> Tracer<'s> {
    /// Takes the snapshot.
    pub fn new(sim: &'s Sim) -> Tracer<'s> {
        let mut nodes = IdxVec::new();
        let mut sws = IdxVec::new();
        for (i, n) in sim.nodes.iter().enumerate() {
            let sw = match (&n.switch, n.kind) {
                (Some(s), NodeKind::Switch) => OptIdx::some(sws.push(SwLite {
                    node: NodeIdx(i as u32),
                    top: s.info.linear_fdb_top.0,
                    lft: &s.lft,
                    sl2vl: &s.sl2vl,
                    mft: &s.mft,
                    mtop: s.info.multicast_fdb_top.0,
                })),
                _ => OptIdx::NONE,
            };
            nodes.push(NodeLite {
                guid: n.info.node_guid,
                first_port: n.first_port,
                num_ports: n.num_ports,
                sw,
            });
        }
        let mut ports = IdxVec::new();
        let mut lid_owner = vec![OptIdx::NONE; Lid::MAX_UNICAST.0 as usize + 1];
        let mut any_enforcement = false;
        for (i, p) in sim.ports.iter().enumerate() {
            let node = &sim.nodes[p.node.idx()];
            let is_switch = node.kind == NodeKind::Switch;
            let end = p.exists && (!is_switch || p.num == 0);
            let info = &p.info;
            let up = p.exists
                && node.alive
                && ((is_switch && p.num == 0)
                    || (info.port_physical_state == PhysPortState::LinkUp
                        && info.port_state == PortState::Active));
            let enf_in = is_switch && p.num != 0 && info.partition_enforcement_inbound;
            let enf_out = is_switch && p.num != 0 && info.partition_enforcement_outbound;
            any_enforcement |= enf_in || enf_out;
            let flags = (up as u8 * UP)
                | (enf_in as u8 * ENF_IN)
                | (enf_out as u8 * ENF_OUT)
                | (end as u8 * END);
            let lite = PortLite {
                node: p.node,
                remote: p.remote.into(),
                lid: if end { info.lid.0 } else { 0 },
                lmc: info.lmc.min(7),
                num: p.num,
                flags,
                data_vls: info.operational_vls.data_vls().unwrap_or(0),
            };
            if end && lite.lid != 0 {
                let first = lite.lid as usize;
                let last = (first + (1usize << lite.lmc)).min(lid_owner.len());
                for slot in lid_owner.iter_mut().take(last).skip(first) {
                    if slot.is_none() {
                        *slot = OptIdx::some(PortIdx(i as u32));
                    }
                }
            }
            ports.push(lite);
        }
        Tracer {
            sim,
            nodes,
            ports,
            sws,
            lid_owner,
            any_enforcement,
        }
    }

    /// The end port owning `lid`, if any.
    pub fn owner(&self, lid: Lid) -> Option<PortIdx> {
        self.lid_owner.get(lid.0 as usize)?.get()
    }

    // ---- Locations and small checks.

    fn guid_of(&self, p: PortIdx) -> Guid {
        self.nodes[self.ports[p].node].guid
    }

    fn not_active(&self, p: PortIdx) -> Dropped {
        let sp = &self.sim.ports[p.idx()];
        let alive = self.sim.nodes[sp.node.idx()].alive;
        Dropped::PortNotActive {
            node: self.guid_of(p),
            port: sp.num,
            state: if alive {
                sp.info.port_state
            } else {
                PortState::Down
            },
        }
    }

    fn pkey_drop(&self, p: PortIdx, pkey: PKey, check: PKeyCheck) -> Dropped {
        Dropped::PKey {
            node: self.guid_of(p),
            port: self.ports[p].num,
            pkey,
            check,
        }
    }

    fn membership(&self, p: PortIdx, base: u16) -> Memb {
        let mut m = Memb::None;
        for k in self.sim.ports[p.idx()].pkeys() {
            if !k.is_invalid() && k.base() == base {
                if k.is_full() {
                    return Memb::Full;
                }
                m = Memb::Limited;
            }
        }
        m
    }

    /// A switch port's enforcement: the partition held, one of the two a full member.
    /// Switch enforcement checks the partition only: a switch port's table is a copy of
    /// the end port's (OpenSM copies limited keys as they are), and limited members must
    /// still reach full members through it.
    fn passes(&self, p: PortIdx, key: PKey) -> bool {
        self.membership(p, key.base()) != Memb::None
    }

    /// The key a packet from `src` carries for `pkey`'s partition.
    fn source_key(&self, src: PortIdx, pkey: PKey) -> Result<PKey, Dropped> {
        match self.membership(src, pkey.base()) {
            Memb::None => Err(self.pkey_drop(src, pkey, PKeyCheck::SourceLacks)),
            Memb::Limited => Ok(PKey(pkey.base())),
            Memb::Full => Ok(PKey(pkey.base() | 0x8000)),
        }
    }

    fn dest_check(&self, p: PortIdx, key: PKey) -> Result<(), Dropped> {
        match self.membership(p, key.base()) {
            Memb::None => Err(self.pkey_drop(p, key, PKeyCheck::DestinationLacks)),
            Memb::Limited if !key.is_full() => Err(self.pkey_drop(p, key, PKeyCheck::BothLimited)),
            _ => Ok(()),
        }
    }

    /// The link out of `out`: both ends ACTIVE. Returns the far end.
    #[inline]
    fn link(&self, out: PortIdx) -> Result<PortIdx, Dropped> {
        let p = &self.ports[out];
        let remote = match p.remote.get() {
            Some(r) if p.flags & UP != 0 => r,
            _ => return Err(self.not_active(out)),
        };
        if self.ports[remote].flags & UP == 0 {
            return Err(self.not_active(remote));
        }
        Ok(remote)
    }

    /// VL of the link from `out` to `next`.
    #[inline]
    fn vl_ok(
        &self,
        in_port: u8,
        out: PortIdx,
        next: PortIdx,
        vl: u8,
        sl: u8,
    ) -> Result<(), Dropped> {
        let op = &self.ports[out];
        if vl == 15 {
            return Err(Dropped::Vl15 {
                node: self.guid_of(out),
                in_port,
                out_port: op.num,
                sl,
            });
        }
        for p in [out, next] {
            let lite = &self.ports[p];
            if vl >= lite.data_vls {
                return Err(Dropped::VlNotOperational {
                    node: self.guid_of(p),
                    port: lite.num,
                    vl,
                    data_vls: lite.data_vls,
                });
            }
        }
        Ok(())
    }

    /// The first link of a packet a CA (or router) port sends: the far end and the VL.
    fn first_link(&self, src: PortIdx, sl: u8) -> Result<(PortIdx, u8), Dropped> {
        let next = self.link(src)?;
        let vl = self.sim.ports[src.idx()].sl2vl[(sl & 15) as usize];
        self.vl_ok(0, src, next, vl, sl)?;
        Ok((next, vl))
    }

    /// The hints with each group cut down to the ports whose links are up at both ends,
    /// once per run, so a hop's choice is one lookup.
    fn ar_view<'a>(&self, ar: &'a [SwitchAr]) -> Vec<ArSwitch<'a>> {
        self.sws
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let node = &self.nodes[s.node];
                let Some(a) = ar.get(i) else {
                    return ArSwitch::default();
                };
                let usable = a
                    .groups
                    .iter()
                    .map(|g| {
                        g.iter()
                            .copied()
                            .filter(|&p| {
                                p != 0 && p <= node.num_ports && self.link(node.port(p)).is_ok()
                            })
                            .collect()
                    })
                    .collect();
                ArSwitch {
                    lid_group: &a.lid_group,
                    usable,
                }
            })
            .collect()
    }

    /// The adaptive choice at switch `s`, if the hints give one.
    #[inline]
    fn ar_pick(&self, s: &SwLite<'_>, ar: &ArSwitch<'_>, dlid: u16, h: u64) -> Option<u8> {
        let g = *ar.lid_group.get(dlid as usize)?;
        let group = ar.usable.get(g as usize)?;
        if group.is_empty() {
            return None;
        }
        let guid = self.nodes[s.node].guid;
        group
            .get((mix(h ^ guid.0) % group.len() as u64) as usize)
            .copied()
    }

    /// Everything a switch does with a packet that came in on `in_port`.
    #[inline]
    fn at_switch(
        &self,
        s: SwIdx,
        in_port: u8,
        pkt: &Pkt,
        ar: Option<(&ArSwitch<'_>, u64)>,
    ) -> Result<Fwd, Dropped> {
        let sw = &self.sws[s];
        let node = &self.nodes[sw.node];
        if in_port != 0 {
            let ip = node.port(in_port);
            if self.ports[ip].flags & ENF_IN != 0 && !self.passes(ip, pkt.key) {
                return Err(self.pkey_drop(ip, pkt.key, PKeyCheck::SwitchInbound));
            }
        }
        let own = node.port(0);
        if self.ports[own].owns(pkt.dlid) {
            return Ok(Fwd::Deliver(own));
        }
        let no_route = || Dropped::NoRoute {
            node: node.guid,
            lid: Lid(pkt.dlid),
            top: Lid(sw.top),
        };
        if pkt.dlid > sw.top {
            return Err(no_route());
        }
        let mut port = sw.lft.get(pkt.dlid as usize).copied().unwrap_or(255);
        if port == 0 || port > node.num_ports {
            return Err(no_route());
        }
        if let Some((ar, h)) = ar {
            if let Some(p) = self.ar_pick(sw, ar, pkt.dlid, h) {
                port = p;
            }
        }
        let out = node.port(port);
        let next = self.link(out)?;
        if self.ports[out].flags & ENF_OUT != 0 && !self.passes(out, pkt.key) {
            return Err(self.pkey_drop(out, pkt.key, PKeyCheck::SwitchOutbound));
        }
        let vl = sw.vl(node.num_ports, in_port, port, pkt.sl);
        self.vl_ok(in_port, out, next, vl, pkt.sl)?;
        Ok(Fwd::Out { out, next, vl })
    }

    fn wrong_lid(&self, p: PortIdx, dlid: u16) -> Dropped {
        Dropped::WrongLid {
            node: self.guid_of(p),
            port: self.ports[p].num,
            lid: Lid(dlid),
        }
    }

    /// Walks one packet from port `src`. Returns the port that took it in and the key it
    /// carried.
    fn walk<S: Sink>(
        &self,
        src: PortIdx,
        dlid: Lid,
        sl: u8,
        pkey: PKey,
        ar: Option<(&[ArSwitch<'_>], u64)>,
        sink: &mut S,
    ) -> Result<(PortIdx, PKey), Dropped> {
        if !dlid.is_unicast() {
            return Err(Dropped::BadDestination { lid: dlid });
        }
        let sp = self.ports[src];
        if sp.flags & UP == 0 {
            return Err(self.not_active(src));
        }
        let key = self.source_key(src, pkey)?;
        let pkt = Pkt {
            dlid: dlid.0,
            sl,
            key,
        };
        if sp.owns(dlid.0) {
            self.dest_check(src, key)?;
            return Ok((src, key));
        }
        let hash = ar.map(|(_, h)| h);
        let mut visited = [OptIdx::<SwIdx>::NONE; MAX_HOPS as usize + 2];
        let mut seen = 0usize;
        let mut links = 0u32;
        let (mut sw, mut in_port) = match self.nodes[sp.node].sw.get() {
            Some(s) => (s, 0u8),
            None => {
                let (next, vl) = self.first_link(src, sl)?;
                sink.hop(sp.node, 0, src, vl);
                links = 1;
                let np = self.ports[next];
                let Some(nsw) = self.nodes[np.node].sw.get() else {
                    if !np.owns(dlid.0) {
                        return Err(self.wrong_lid(next, dlid.0));
                    }
                    self.dest_check(next, key)?;
                    return Ok((next, key));
                };
                (nsw, np.num)
            }
        };
        loop {
            let node = self.sws[sw].node;
            if visited[..seen].contains(&OptIdx::some(sw)) {
                return Err(Dropped::Loop {
                    node: self.nodes[node].guid,
                    hops: links,
                });
            }
            if let Some(slot) = visited.get_mut(seen) {
                *slot = OptIdx::some(sw);
                seen += 1;
            }
            let hints = match (ar, hash) {
                (Some((a, _)), Some(h)) => a.get(sw.idx()).map(|x| (x, h)),
                _ => None,
            };
            match self.at_switch(sw, in_port, &pkt, hints)? {
                Fwd::Deliver(p0) => {
                    self.dest_check(p0, key)?;
                    return Ok((p0, key));
                }
                Fwd::Out { out, next, vl } => {
                    sink.hop(node, in_port, out, vl);
                    links += 1;
                    let np = self.ports[next];
                    if links > MAX_HOPS {
                        return Err(Dropped::Loop {
                            node: self.nodes[np.node].guid,
                            hops: links,
                        });
                    }
                    let Some(nsw) = self.nodes[np.node].sw.get() else {
                        if !np.owns(dlid.0) {
                            return Err(self.wrong_lid(next, dlid.0));
                        }
                        self.dest_check(next, key)?;
                        return Ok((next, key));
                    };
                    sw = nsw;
                    in_port = np.num;
                }
            }
        }
    }

    fn path_from(
        &self,
        src: PortIdx,
        dlid: Lid,
        sl: Sl,
        pkey: PKey,
        ar: Option<(&[ArSwitch<'_>], u64)>,
    ) -> Result<Path, Dropped> {
        let mut rec = Recorder {
            t: self,
            hops: Vec::new(),
        };
        let (dest, key) = self.walk(src, dlid, sl.0, pkey, ar, &mut rec)?;
        Ok(Path {
            hops: rec.hops,
            dest_node: self.guid_of(dest),
            dest_port: self.ports[dest].num,
            pkey: key,
        })
    }

    /// Traces one packet through the LFTs.
    pub fn trace(&self, src_lid: Lid, dst_lid: Lid, sl: Sl, pkey: PKey) -> Result<Path, Dropped> {
        let src = self
            .owner(src_lid)
            .ok_or(Dropped::UnknownSource { lid: src_lid })?;
        self.path_from(src, dst_lid, sl, pkey, None)
    }

    /// Traces one flow with adaptive-routing hints (see the module documentation).
    pub fn trace_adaptive(
        &self,
        src_lid: Lid,
        dst_lid: Lid,
        sl: Sl,
        pkey: PKey,
        ar: &[SwitchAr],
        flow_id: u64,
    ) -> Result<Path, Dropped> {
        let src = self
            .owner(src_lid)
            .ok_or(Dropped::UnknownSource { lid: src_lid })?;
        let h = flow_hash(flow_id, src_lid, dst_lid);
        let view = self.ar_view(ar);
        self.path_from(src, dst_lid, sl, pkey, Some((&view, h)))
    }

    // ---- All pairs.

    /// Valid P_Keys of a port, one per partition with its best membership, table order.
    fn compact_keys(&self, p: PortIdx, out: &mut Vec<PKey>) {
        out.clear();
        for k in self.sim.ports[p.idx()].pkeys() {
            if k.is_invalid() {
                continue;
            }
            match out.iter_mut().find(|o| o.base() == k.base()) {
                Some(o) => {
                    if k.is_full() {
                        *o = *k;
                    }
                }
                None => out.push(*k),
            }
        }
    }

    /// The best shared partition of two ports as the key the source would send.
    fn best_key(src: &[PKey], dst: &[PKey]) -> Option<PKey> {
        let mut best: Option<((bool, bool), PKey)> = None;
        for s in src {
            let Some(d) = dst.iter().find(|d| d.base() == s.base()) else {
                continue;
            };
            let score = (s.is_full() || d.is_full(), s.is_full());
            if best.is_none_or(|(b, _)| score > b) {
                best = Some((score, *s));
            }
        }
        best.map(|(_, k)| k)
    }

    /// Every CA port to every LID of every CA port.
    pub fn check_all_pairs(&self, opts: &AllPairsOptions) -> AllPairs {
        self.all_pairs(opts, None)
    }

    /// [`Tracer::check_all_pairs`] with adaptive routing; reports per-link flow counts.
    pub fn check_all_pairs_adaptive(&self, opts: &AllPairsOptions, ar: &[SwitchAr]) -> AllPairs {
        self.all_pairs(opts, Some(ar))
    }

    fn all_pairs(&self, opts: &AllPairsOptions, ar: Option<&[SwitchAr]>) -> AllPairs {
        let sl = opts.sl.0 & 15;
        let view = ar.map(|a| self.ar_view(a));
        let ar = view.as_deref();
        let ca_ports: Vec<PortIdx> = self
            .sim
            .ports
            .iter()
            .enumerate()
            .filter(|(_, p)| p.exists && self.sim.nodes[p.node.idx()].kind == NodeKind::Ca)
            .map(|(i, _)| PortIdx(i as u32))
            .collect();
        // Per-port compact key lists (flat).
        let mut key_off = Vec::with_capacity(ca_ports.len() + 1);
        let mut keys = Vec::new();
        let mut scratch = Vec::new();
        for &p in &ca_ports {
            key_off.push(keys.len() as u32);
            self.compact_keys(p, &mut scratch);
            keys.extend_from_slice(&scratch);
        }
        key_off.push(keys.len() as u32);

        let srcs: Vec<Src> = ca_ports
            .iter()
            .map(|&p| {
                let lite = &self.ports[p];
                let fixed = match opts.pkey {
                    PKeyChoice::Fixed(k) => self.source_key(p, k).ok(),
                    PKeyChoice::BestShared => None,
                };
                Src {
                    port: p,
                    lid: lite.lid,
                    up: lite.flags & UP != 0,
                    first: self
                        .first_link(p, sl)
                        .map(|(n, _)| n)
                        .map_err(|d| d.reason()),
                    fixed,
                }
            })
            .collect();
        // (position in `ca_ports`, LID)
        let mut dests: Vec<(u32, u16)> = Vec::new();
        for (ci, &p) in ca_ports.iter().enumerate() {
            let lite = &self.ports[p];
            if lite.lid == 0 {
                continue;
            }
            let n = if opts.base_lids_only {
                1
            } else {
                1u32 << lite.lmc
            };
            for i in 0..n {
                let lid = lite.lid as u32 + i;
                if lid <= Lid::MAX_UNICAST.0 as u32 {
                    dests.push((ci as u32, lid as u16));
                }
            }
        }
        let walk_each = ar.is_some() || opts.link_load;
        let nports = self.ports.len();
        let ctx = Ctx {
            srcs: &srcs,
            keys: &keys,
            key_off: &key_off,
            opts,
            sl,
            ar,
            walk_each,
        };
        let mut acc = dests
            .par_iter()
            .enumerate()
            .fold(
                || Acc::new(if walk_each { nports } else { 0 }),
                |mut acc, (di, &(dci, lid))| {
                    self.one_dest(&ctx, di as u32, dci as usize, lid, &mut acc);
                    acc
                },
            )
            .reduce(
                || Acc::new(if walk_each { nports } else { 0 }),
                |a, b| a.merge(b, opts.max_failures),
            );
        acc.failures.sort_unstable_by_key(|f| (f.0, f.1));
        acc.failures.truncate(opts.max_failures);
        let failures = acc
            .failures
            .iter()
            .map(|&(di, si, key)| {
                let s = &srcs[si as usize];
                let dlid = Lid(dests[di as usize].1);
                let src_lid = Lid(s.lid);
                let why = if s.lid == 0 {
                    Dropped::UnknownSource { lid: src_lid }
                } else if key == PKey(0) && opts.pkey == PKeyChoice::BestShared && s.up {
                    self.pkey_drop(s.port, key, PKeyCheck::NotShared)
                } else {
                    let hints = ar.map(|a| (a, flow_hash(opts.flow_id, src_lid, dlid)));
                    match self.walk(s.port, dlid, sl, key, hints, &mut NoSink) {
                        Err(d) => d,
                        // Cannot happen: the memoised outcome is the walk's; say so plainly.
                        Ok(_) => Dropped::BadDestination { lid: dlid },
                    }
                };
                Failure {
                    src_guid: self.sim.ports[s.port.idx()].guid,
                    src_lid,
                    dst_lid: dlid,
                    pkey: key,
                    why,
                }
            })
            .collect();
        AllPairs {
            pairs: srcs.len() as u64 * dests.len() as u64,
            delivered: acc.delivered,
            dropped: acc.dropped,
            hops: acc.hops,
            failures,
            link_flows: acc.load,
        }
    }

    /// Every source to one destination LID.
    fn one_dest(&self, ctx: &Ctx<'_>, di: u32, dci: usize, dlid: u16, acc: &mut Acc) {
        acc.variants_used = 0;
        let dkeys = ctx.keys_of(dci);
        for (si, s) in ctx.srcs.iter().enumerate() {
            let key = match ctx.opts.pkey {
                PKeyChoice::Fixed(k) => s.fixed.unwrap_or(k),
                PKeyChoice::BestShared => Self::best_key(ctx.keys_of(si), dkeys).unwrap_or(PKey(0)),
            };
            let res = if s.lid == 0 {
                Err(DropReason::UnknownSource)
            } else if !s.up {
                Err(DropReason::PortNotActive)
            } else if key == PKey(0) && ctx.opts.pkey == PKeyChoice::BestShared {
                Err(DropReason::PKey)
            } else if ctx.walk_each {
                let hints = ctx
                    .ar
                    .map(|a| (a, flow_hash(ctx.opts.flow_id, Lid(s.lid), Lid(dlid))));
                let mut outs = OutPorts {
                    ports: [PortIdx(0); MAX_HOPS as usize + 1],
                    n: 0,
                };
                match self.walk(s.port, Lid(dlid), ctx.sl, key, hints, &mut outs) {
                    Ok(_) => {
                        for &p in &outs.ports[..outs.n] {
                            if let Some(c) = acc.load.get_mut(p.idx()) {
                                *c += 1;
                            }
                        }
                        Ok(outs.n as u32)
                    }
                    Err(d) => Err(d.reason()),
                }
            } else {
                self.pair(s, dlid, ctx.sl, key, acc)
            };
            match res {
                Ok(links) => {
                    acc.delivered += 1;
                    if let Some(h) = acc.hops.get_mut(links as usize) {
                        *h += 1;
                    }
                }
                Err(r) => {
                    *acc.dropped.slot(r) += 1;
                    if acc.failures.len() < ctx.opts.max_failures {
                        acc.failures.push((di, si as u32, key));
                    }
                }
            }
        }
    }

    /// One pair by the memoised tables: links crossed, or why it died.
    fn pair(
        &self,
        s: &Src,
        dlid: u16,
        sl: u8,
        key: PKey,
        acc: &mut Acc,
    ) -> Result<u32, DropReason> {
        // The walk's order: source up (checked by the caller), source key, loopback, first
        // link, first switch, the memoised rest.
        let key = self.source_key(s.port, key).map_err(|d| d.reason())?;
        let pkt = Pkt { dlid, sl, key };
        if self.ports[s.port].owns(dlid) {
            return self
                .dest_check(s.port, key)
                .map(|_| 0)
                .map_err(|d| d.reason());
        }
        let next = s.first?;
        let np = self.ports[next];
        let out = if let Some(nsw) = self.nodes[np.node].sw.get() {
            match self.at_switch(nsw, np.num, &pkt, None) {
                Err(d) => Outcome {
                    end: End::Drop(d.reason()),
                    links: 1,
                },
                Ok(Fwd::Deliver(p0)) => Outcome {
                    end: End::Reached(p0),
                    links: 1,
                },
                Ok(Fwd::Out { next: n2, .. }) => {
                    let v =
                        acc.variant(if self.any_enforcement { key.0 } else { 0 }, self.sws.len());
                    let o = self.after(nsw, n2, &pkt, acc, v);
                    Outcome {
                        end: o.end,
                        links: 1 + o.links,
                    }
                }
            }
        } else {
            if np.owns(dlid) {
                Outcome {
                    end: End::Reached(next),
                    links: 1,
                }
            } else {
                Outcome {
                    end: End::Drop(DropReason::WrongLid),
                    links: 1,
                }
            }
        };
        if out.links > MAX_HOPS {
            return Err(DropReason::Loop);
        }
        match out.end {
            End::Drop(r) => Err(r),
            End::Reached(p) => self
                .dest_check(p, key)
                .map(|_| out.links)
                .map_err(|d| d.reason()),
        }
    }

    /// The fate of a packet that left switch `u` (entered, checked and forwarded) towards
    /// port `next`, memoised per switch in `acc.memos[v]`.
    fn after(&self, u: SwIdx, next: PortIdx, pkt: &Pkt, acc: &mut Acc, v: usize) -> Outcome {
        let Acc { memos, stack, .. } = acc;
        let memo = &mut memos[v];
        if let Memo::Done(o) = memo[u] {
            return o;
        }
        stack.clear();
        stack.push(u);
        memo[u] = Memo::Busy;
        let mut cur_next = next;
        let (end, rel) = loop {
            let np = self.ports[cur_next];
            let Some(vsw) = self.nodes[np.node].sw.get() else {
                let end = if np.owns(pkt.dlid) {
                    End::Reached(cur_next)
                } else {
                    End::Drop(DropReason::WrongLid)
                };
                break (end, 1);
            };
            if memo[vsw] == Memo::Busy {
                break (End::Drop(DropReason::Loop), 1);
            }
            match self.at_switch(vsw, np.num, pkt, None) {
                Err(d) => break (End::Drop(d.reason()), 1),
                Ok(Fwd::Deliver(p0)) => break (End::Reached(p0), 1),
                Ok(Fwd::Out { next: n2, .. }) => match memo[vsw] {
                    Memo::Done(o) => break (o.end, 1u32.saturating_add(o.links)),
                    _ => {
                        memo[vsw] = Memo::Busy;
                        stack.push(vsw);
                        cur_next = n2;
                    }
                },
            }
        };
        let len = stack.len() as u32;
        for (k, &s) in stack.iter().enumerate() {
            memo[s] = Memo::Done(Outcome {
                end,
                links: rel.saturating_add(len - 1 - k as u32),
            });
        }
        match memo[u] {
            Memo::Done(o) => o,
            _ => Outcome {
                end: End::Drop(DropReason::Loop),
                links: 0,
            },
        }
    }

    // ---- Multicast.

    /// Follows the MFTs from the port owning `src_lid` (see the module documentation).
    pub fn trace_multicast(&self, src_lid: Lid, mlid: Lid) -> Result<Multicast, Dropped> {
        let src = self
            .owner(src_lid)
            .ok_or(Dropped::UnknownSource { lid: src_lid })?;
        if !mlid.is_multicast() {
            return Err(Dropped::BadDestination { lid: mlid });
        }
        let sp = self.ports[src];
        if sp.flags & UP == 0 {
            return Err(self.not_active(src));
        }
        let mut out = Multicast {
            reached: Vec::new(),
            reached_guids: Vec::new(),
            drops: Vec::new(),
            links: 0,
        };
        let mut queue: std::collections::VecDeque<(SwIdx, u8)> = Default::default();
        match self.nodes[sp.node].sw.get() {
            Some(s) => queue.push_back((s, 0)),
            None => {
                let next = self.link(src)?;
                out.links = 1;
                let np = self.ports[next];
                match self.nodes[np.node].sw.get() {
                    Some(nsw) => queue.push_back((nsw, np.num)),
                    None => out.reached.push(next),
                }
            }
        }
        let mut visited = IdxVec::filled(false, self.sws.len());
        let off = (mlid.0 - Lid::MIN_MULTICAST.0) as usize;
        while let Some((s, in_port)) = queue.pop_front() {
            let sw = &self.sws[s];
            let node = &self.nodes[sw.node];
            if std::mem::replace(&mut visited[s], true) {
                out.drops.push(Dropped::Loop {
                    node: node.guid,
                    hops: out.links,
                });
                continue;
            }
            let entry = if sw.mtop != 0 && mlid.0 > sw.mtop {
                None
            } else {
                sw.mft.get(off)
            };
            let ports: Vec<u8> = entry.map_or_else(Vec::new, |masks| {
                (0..=node.num_ports)
                    .filter(|&p| {
                        masks
                            .get(p as usize / 16)
                            .is_some_and(|m| m & (1 << (p % 16)) != 0)
                    })
                    .collect()
            });
            if ports.is_empty() {
                out.drops.push(Dropped::NoRoute {
                    node: node.guid,
                    lid: mlid,
                    top: Lid(sw.mtop),
                });
                continue;
            }
            for p in ports {
                if p == in_port {
                    continue;
                }
                let pi = node.port(p);
                if p == 0 {
                    out.reached.push(pi);
                    continue;
                }
                match self.link(pi) {
                    Err(d) => out.drops.push(d),
                    Ok(next) => {
                        out.links += 1;
                        let np = self.ports[next];
                        match self.nodes[np.node].sw.get() {
                            Some(nsw) => queue.push_back((nsw, np.num)),
                            None => out.reached.push(next),
                        }
                    }
                }
            }
        }
        out.reached.sort_unstable();
        out.reached.dedup();
        out.reached_guids = out
            .reached
            .iter()
            .map(|p| {
                let sp = &self.sim.ports[p.idx()];
                (sp.guid, sp.num)
            })
            .collect();
        Ok(out)
    }

    /// The switch node of a dense switch index (the order of `sm_routing::Topo::switches`).
    pub fn switch_node(&self, i: usize) -> Option<NodeIdx> {
        self.sws.as_slice().get(i).map(|s| s.node)
    }
}

/// One switch's adaptive-routing hints, groups cut down to usable ports.
#[derive(Debug, Default)]
struct ArSwitch<'a> {
    lid_group: &'a [u16],
    usable: Vec<Vec<u8>>,
}

/// A source port, precomputed.
#[derive(Debug, Clone, Copy)]
struct Src {
    port: PortIdx,
    lid: u16,
    up: bool,
    /// The far end of the first link, or why the first link fails.
    first: Result<PortIdx, DropReason>,
    /// The fixed key as the source sends it (`None`: lacks it; the walk reports that).
    fixed: Option<PKey>,
}

struct Ctx<'a> {
    srcs: &'a [Src],
    /// Compact P_Key lists of the CA ports, flat, with offsets.
    keys: &'a [PKey],
    key_off: &'a [u32],
    opts: &'a AllPairsOptions,
    sl: u8,
    ar: Option<&'a [ArSwitch<'a>]>,
    walk_each: bool,
}

impl Ctx<'_> {
    fn keys_of(&self, i: usize) -> &[PKey] {
        match (self.key_off.get(i), self.key_off.get(i + 1)) {
            (Some(&a), Some(&b)) => self.keys.get(a as usize..b as usize).unwrap_or(&[]),
            _ => &[],
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// Arrived at this port, which owns the LID: only the destination's P_Key check is left.
    Reached(PortIdx),
    Drop(DropReason),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Outcome {
    end: End,
    links: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Memo {
    Unknown,
    Busy,
    Done(Outcome),
}

/// Per-thread accumulator and scratch.
struct Acc {
    delivered: u64,
    dropped: DropCounts,
    hops: Vec<u64>,
    /// (destination index, source index, key tried), the first ones of this piece.
    failures: Vec<(u32, u32, PKey)>,
    /// Flows out of each port slot (the public `link_flows`).
    load: Vec<u64>,
    /// Memo tables per packet key (one when no switch enforces partitions).
    memos: Vec<IdxVec<SwIdx, Memo>>,
    memo_keys: Vec<u16>,
    variants_used: usize,
    stack: Vec<SwIdx>,
}

impl Acc {
    fn new(ports: usize) -> Acc {
        Acc {
            delivered: 0,
            dropped: DropCounts::default(),
            hops: vec![0; MAX_HOPS as usize + 1],
            failures: Vec::new(),
            load: vec![0; ports],
            memos: Vec::new(),
            memo_keys: Vec::new(),
            variants_used: 0,
            stack: Vec::new(),
        }
    }

    /// The memo table for packet key `key` of the current destination.
    fn variant(&mut self, key: u16, switches: usize) -> usize {
        if let Some(i) = self.memo_keys[..self.variants_used]
            .iter()
            .position(|&k| k == key)
        {
            return i;
        }
        let i = self.variants_used;
        if i == self.memos.len() {
            self.memos.push(IdxVec::filled(Memo::Unknown, switches));
            self.memo_keys.push(key);
        } else {
            self.memos[i].clear();
            self.memos[i].resize(switches, Memo::Unknown);
            self.memo_keys[i] = key;
        }
        self.variants_used += 1;
        i
    }

    fn merge(mut self, o: Acc, max_failures: usize) -> Acc {
        self.delivered += o.delivered;
        self.dropped.merge(&o.dropped);
        for (a, b) in self.hops.iter_mut().zip(&o.hops) {
            *a += b;
        }
        for (a, b) in self.load.iter_mut().zip(&o.load) {
            *a += b;
        }
        self.failures.extend_from_slice(&o.failures);
        self.failures.sort_unstable_by_key(|f| (f.0, f.1));
        self.failures.truncate(max_failures);
        self
    }
}

impl Sim {
    /// Traces one data packet (see [`crate::trace`]).
    pub fn trace(&self, src_lid: Lid, dst_lid: Lid, sl: Sl, pkey: PKey) -> Result<Path, Dropped> {
        Tracer::new(self).trace(src_lid, dst_lid, sl, pkey)
    }

    /// Traces one flow with adaptive-routing hints (see [`crate::trace`]).
    pub fn trace_adaptive(
        &self,
        src_lid: Lid,
        dst_lid: Lid,
        sl: Sl,
        pkey: PKey,
        ar: &[SwitchAr],
        flow_id: u64,
    ) -> Result<Path, Dropped> {
        Tracer::new(self).trace_adaptive(src_lid, dst_lid, sl, pkey, ar, flow_id)
    }

    /// Every CA port to every LID of every CA port (see [`crate::trace`]).
    pub fn check_all_pairs(&self, opts: &AllPairsOptions) -> AllPairs {
        Tracer::new(self).check_all_pairs(opts)
    }

    /// [`Sim::check_all_pairs`] with adaptive routing; reports per-link flow counts.
    pub fn check_all_pairs_adaptive(&self, opts: &AllPairsOptions, ar: &[SwitchAr]) -> AllPairs {
        Tracer::new(self).check_all_pairs_adaptive(opts, ar)
    }

    /// Follows a multicast packet through the MFTs (see [`crate::trace`]).
    pub fn trace_multicast(&self, src_lid: Lid, mlid: Lid) -> Result<Multicast, Dropped> {
        Tracer::new(self).trace_multicast(src_lid, mlid)
    }
}
