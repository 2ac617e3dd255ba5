//! Multicast groups as the SA keeps them: the registry of groups keyed by MGID, their
//! members, the MLID pool, and the rules of MCMemberRecord join (Set), leave (Delete) and
//! query (Get / GetTable), as the specification (IBA 15.2.5.17, o15-0.1.x and o15-0.2.x)
//! and OpenSM 3.3.23 apply them. Pure data: the SA server parses the MAD, calls
//! [`McRegistry::join`] / [`McRegistry::leave`] / [`McRegistry::query`], sends the record
//! or the error's [`McError::sa_status`] back, and has the group's spanning tree
//! recomputed (`sm_routing::mcast`) when the outcome says so.
//!
//! # Groups and members
//! A group is an MGID with one MLID and the parameters every member shares (Q_Key, P_Key,
//! MTU, rate, packet lifetime, SL, flow label, hop limit, scope, TClass). Members are port
//! GUIDs, each with its JoinState bits and whether it was joined by proxy. A port *receives*
//! when it is a full member or a non-member (bits 0 and 1); the send-only bits (2 and 3) only
//! let it send. A port *keeps the group alive* when it is a full member or a send-only full
//! member (bits 0 and 3): that is what OpenSM counts as the group's full members.
//!
//! # Join (Set)
//! 1. The component mask must name MGID, PortGID and JoinState
//!    (else `ERR_REQ_INSUFFICIENT_COMPONENTS`); an MTU or rate given with its selector must
//!    be a defined code; the PortGID prefix must be the subnet's (the default prefix
//!    fe80:: stands for it) or the answer is `ERR_REQ_INVALID_GID`.
//! 2. The port must be known, and a requester joining another port (a proxy join) must
//!    share a partition with it (one of the two a full member); a P_Key in the mask must be
//!    valid.
//! 3. No group with the MGID: the request *creates* one when its JoinState has a full bit
//!    (full or send-only full) and the mask also names Q_Key, TClass, P_Key, FlowLabel and
//!    SL (else `ERR_REQ_INSUFFICIENT_COMPONENTS`). An MGID of zero asks the SA for one (see
//!    [`McRegistry::join`] for the layout); a given MGID must start with 0xFF, keep the three
//!    reserved flag bits clear and not use the SA signature 0xA01B in link-local scope (IPoIB
//!    MGIDs, signature 0x401B or 0x601B, are exempt) and, with
//!    [`McConfig::ipoib_create_validation`], an IPoIB group other than the broadcast group
//!    needs its partition's broadcast group (same scope and P_Key) and must agree with it.
//!    MTU and rate come from the selectors and the port's own (the port's when not asked
//!    for); the MLID is the one asked for when it is free, else the lowest free.
//! 4. A group exists: with [`McConfig::join_validation`] every component in the mask
//!    (Q_Key, P_Key, TClass, SL, FlowLabel, HopLimit) must match it (two limited P_Keys never
//!    match); MTU and rate selectors must hold for the group's values.
//! 5. Always: the port's MTU and rate must carry the group's, the JoinState must not be
//!    empty, the port's P_Key table must hold the group's partition (either membership),
//!    and a port already a member can only be changed by itself, or, when it was joined by
//!    proxy, by a port of the group's partition (o15-0.2.1).
//! 6. The requested bits are OR'ed into the port's; the answer is the request with the
//!    group's parameters and the port's whole JoinState.
//!
//! # Leave (Delete)
//! The mask must name MGID, PortGID and JoinState; the group must exist, the port be a
//! member, the request's bits be a non-empty subset of the port's (o15-0.1.14), and the
//! requester pass the rule of step 5. The bits are removed; a port left with none is no
//! member. When the last port that keeps the group alive leaves, every member is dropped and
//! the group deleted, its MLID free again, unless the group is *well known* (created from
//! the partitions configuration), which stays, empty, with its MLID.
//!
//! # Notices
//! A group that gets its first full (or send-only full) member raises trap 66
//! ([`McNotice::Created`]); one that loses its last raises trap 67 ([`McNotice::Deleted`]),
//! as OpenSM reports them, well-known groups included.
//!
//! # Errors and SA statuses
//! [`McError::sa_status`]: insufficient components -> `ERR_REQ_INSUFFICIENT_COMPONENTS`
//! (6), a foreign subnet prefix -> `ERR_REQ_INVALID_GID` (5), no MGID or MLID left ->
//! `ERR_NO_RESOURCES` (1), everything else -> `ERR_REQ_INVALID` (2).
//!
//! # Where we differ from OpenSM
//! - One MLID per group: OpenSM can put several MGIDs on one MLID (IPv6 solicited-node
//!   consolidation, off by default); not done here.
//! - An MLID asked for is honoured only when the mask names MLID (OpenSM takes any non-zero
//!   MLID in the record).
//! - An SA-assigned MGID is `ff1S:a01b` + the subnet prefix (bytes 4..12) + a counter
//!   (bytes 12..16, big-endian). OpenSM writes its counter, in host byte order, over bytes
//!   10..14, on top of the prefix's last two bytes.
//! - A group's scope is always its MGID's scope nibble (OpenSM keeps the record's Scope
//!   field as the creator sent it).
//! - Alias GUIDs (GUIDInfo) are not resolved: a member is the port GUID given.
//! - Partition groups are created whether or not the partition has members in the fabric.
//! - A created group's MGID must start with 0xFF even with the IPoIB validation off.
//! - Without QoS, OpenSM gives partition groups SL 0 unless an `mgid=` line sets `sl=`
//!   itself; the parsed model does not keep where an SL came from, so an `mgid=` line's
//!   `sl=` counts only when it differs from its partition's.

use std::collections::BTreeMap;

use sm_mad::link::{Mtu, Rate};
use sm_mad::mcmember_record::{self as mcr, JoinState, Scope, comp};
use sm_mad::path_record::Selector;
use sm_mad::sa::SaStatus;
use sm_mad::{Gid, Guid, Lid, PKey, Sl};

use crate::partitions::{GroupFlags, Partitions};

/// The first multicast LID.
pub const FIRST_MLID: Lid = Lid::MIN_MULTICAST;
/// Most MLIDs a subnet has: 0xC000..=0xFFFE (0xFFFF is the permissive LID).
pub const MAX_MLIDS: u16 = 0x3FFF;
/// The default GID prefix; in a PortGID it stands for the subnet's prefix.
pub const DEFAULT_SUBNET_PREFIX: u64 = 0xfe80_0000_0000_0000;
/// The MGID signature of groups whose MGID the SA assigned.
pub const SA_SIGNATURE: u16 = 0xA01B;
/// The MGID signature of IPv4-over-IB groups.
pub const IPV4_SIGNATURE: u16 = 0x401B;
/// The MGID signature of IPv6-over-IB groups.
pub const IPV6_SIGNATURE: u16 = 0x601B;
/// Components every join and leave names.
pub const JOIN_COMPS: u64 = comp::MGID | comp::PORT_GID | comp::JOIN_STATE;
/// Components a join that creates its group names.
pub const CREATE_COMPS: u64 =
    JOIN_COMPS | comp::Q_KEY | comp::TCLASS | comp::P_KEY | comp::FLOW_LABEL | comp::SL;
/// The bits that make a port receive the group's packets.
pub const RECEIVING: JoinState = JoinState(JoinState::FULL_MEMBER.0 | JoinState::NON_MEMBER.0);
/// The bits that keep a group alive (OpenSM's "full members").
pub const KEEPS_ALIVE: JoinState =
    JoinState(JoinState::FULL_MEMBER.0 | JoinState::SEND_ONLY_FULL_MEMBER.0);
/// Hop limit of partition groups beyond link-local scope.
pub const MAX_HOP_LIMIT: u8 = 0xFF;

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum McError {
    #[error("component mask {got:#x} lacks {missing:#x}")]
    InsufficientComponents { got: u64, missing: u64 },
    #[error("PortGID prefix {prefix:#018x} is not the subnet's")]
    ForeignPrefix { prefix: u64 },
    #[error("{what} code {code} is not defined")]
    BadCode { what: &'static str, code: u8 },
    #[error("port {0} is not known to the SM")]
    UnknownPort(Guid),
    #[error("requester {requester} shares no partition with port {port}")]
    NoSharedPartition { port: Guid, requester: Guid },
    #[error("P_Key {0} is invalid")]
    InvalidPKey(PKey),
    #[error("no multicast group {0}")]
    NoGroup(Gid),
    #[error("JoinState {0:?} cannot create a group (needs a full member bit)")]
    CreateNeedsFullMember(JoinState),
    #[error("MGID {mgid} cannot be created: {why}")]
    BadMgid { mgid: Gid, why: &'static str },
    #[error("IPoIB group {mgid} needs its partition's broadcast group {broadcast}")]
    NoBroadcastGroup { mgid: Gid, broadcast: Gid },
    #[error("{field} does not match the group's")]
    Mismatch { field: &'static str },
    #[error("{what} asked for cannot be realised on port {port}")]
    NotRealizable { what: &'static str, port: Guid },
    #[error("port {port} cannot carry the group's {what}")]
    PortTooSlow { port: Guid, what: &'static str },
    #[error("JoinState is empty")]
    EmptyJoinState,
    #[error("port {port} is not in partition {pkey} of the group")]
    NotInPartition { port: Guid, pkey: PKey },
    #[error("requester {requester} may not change the membership of port {port}")]
    NotAllowed { port: Guid, requester: Guid },
    #[error("port {port} is not a member of {mgid}")]
    NotAMember { port: Guid, mgid: Gid },
    #[error("JoinState {asked:?} does not fit the port's {held:?}")]
    JoinStateMismatch { asked: JoinState, held: JoinState },
    #[error("no unused MGID left to assign")]
    NoMgid,
    #[error("no free MLID below {FIRST_MLID:?} + {capacity}")]
    NoMlid { capacity: u16 },
}

impl McError {
    /// The SA status to answer with.
    pub fn sa_status(&self) -> SaStatus {
        match self {
            McError::InsufficientComponents { .. } => SaStatus::ReqInsufficientComponents,
            McError::ForeignPrefix { .. } => SaStatus::ReqInvalidGid,
            McError::NoMgid | McError::NoMlid { .. } => SaStatus::NoResources,
            _ => SaStatus::ReqInvalid,
        }
    }
}

/// What the registry needs to know of a port: its MTU (PortInfo:NeighborMTU), its rate (the
/// static rate of its active width and speed, as PathRecord reports it), and its P_Key
/// table (an empty table shares every partition, as OpenSM treats a port without one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortCaps<'a> {
    pub mtu: Mtu,
    pub rate: Rate,
    pub pkeys: &'a [PKey],
}

/// Where the registry looks ports up (the SM's fabric and P_Key tables).
pub trait PortDirectory {
    /// The port with this port GUID, if the SM knows it.
    fn port(&self, guid: Guid) -> Option<PortCaps<'_>>;
}

/// A [`PortDirectory`] held as a table (tests, and callers that copy what they know).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PortTable {
    ports: BTreeMap<Guid, (Mtu, Rate, Vec<PKey>)>,
}

impl PortTable {
    /// An empty table.
    pub fn new() -> PortTable {
        PortTable::default()
    }

    /// Adds or replaces a port.
    pub fn insert(&mut self, guid: Guid, mtu: Mtu, rate: Rate, pkeys: Vec<PKey>) {
        self.ports.insert(guid, (mtu, rate, pkeys));
    }

    /// Removes a port.
    pub fn remove(&mut self, guid: Guid) {
        self.ports.remove(&guid);
    }
}

impl PortDirectory for PortTable {
    fn port(&self, guid: Guid) -> Option<PortCaps<'_>> {
        self.ports.get(&guid).map(|(mtu, rate, pkeys)| PortCaps {
            mtu: *mtu,
            rate: *rate,
            pkeys,
        })
    }
}

/// The table holds the partition of `pkey` (either membership); an invalid key is held by
/// everyone (OpenSM treats it loosely).
pub fn has_pkey(table: &[PKey], pkey: PKey) -> bool {
    pkey.is_invalid()
        || table
            .iter()
            .any(|k| !k.is_invalid() && k.base() == pkey.base())
}

/// Two ports share a partition with at least one of them a full member; a port with an
/// empty table shares with anyone (as OpenSM, since a table is optional).
pub fn share_pkey(a: &[PKey], b: &[PKey]) -> bool {
    let valid = |t: &[PKey]| t.iter().any(|k| !k.is_invalid());
    if !valid(a) || !valid(b) {
        return true;
    }
    a.iter().filter(|k| !k.is_invalid()).any(|ka| {
        b.iter()
            .any(|kb| kb.base() == ka.base() && (ka.is_full() || kb.is_full()))
    })
}

/// One port's membership.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Member {
    /// The PortGID it joined with (the subnet prefix in place of the default one).
    pub port_gid: Gid,
    pub join_state: JoinState,
    /// Joined by another port on its behalf.
    pub proxy: bool,
}

impl Member {
    /// The port receives the group's packets.
    pub fn receives(&self) -> bool {
        self.join_state.0 & RECEIVING.0 != 0
    }

    /// The port keeps the group alive.
    pub fn keeps_alive(&self) -> bool {
        self.join_state.0 & KEEPS_ALIVE.0 != 0
    }
}

/// A multicast group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub mgid: Gid,
    pub mlid: Lid,
    pub q_key: u32,
    /// As created (with its membership bit).
    pub p_key: PKey,
    pub mtu: Mtu,
    pub rate: Rate,
    pub packet_life_time: u8,
    pub sl: Sl,
    pub flow_label: u32,
    pub hop_limit: u8,
    pub scope: Scope,
    pub tclass: u8,
    /// Created from the partitions configuration: outlives its members.
    pub well_known: bool,
    /// The JoinState of the request that created it (what a group-level record shows).
    created_with: JoinState,
    members: BTreeMap<Guid, Member>,
}

impl Group {
    /// Members by port GUID, in GUID order.
    pub fn members(&self) -> impl Iterator<Item = (Guid, &Member)> + '_ {
        self.members.iter().map(|(g, m)| (*g, m))
    }

    /// One member.
    pub fn member(&self, port: Guid) -> Option<&Member> {
        self.members.get(&port)
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// No members.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Members that keep the group alive.
    pub fn full_members(&self) -> usize {
        self.members.values().filter(|m| m.keeps_alive()).count()
    }

    /// (port GUID, JoinState) of every member: the input of the spanning tree.
    pub fn tree_members(&self) -> Vec<(Guid, JoinState)> {
        self.members
            .iter()
            .map(|(g, m)| (*g, m.join_state))
            .collect()
    }

    /// The group as an MCMemberRecord without a port (what an untrusted query sees).
    pub fn record(&self) -> mcr::Repr {
        mcr::Repr {
            mgid: self.mgid,
            port_gid: Gid::default(),
            q_key: self.q_key,
            mlid: self.mlid,
            mtu_selector: Selector::Exactly,
            mtu: self.mtu,
            tclass: self.tclass,
            p_key: self.p_key,
            rate_selector: Selector::Exactly,
            rate: self.rate,
            packet_life_time_selector: Selector::Exactly,
            packet_life_time: self.packet_life_time,
            sl: self.sl,
            flow_label: self.flow_label,
            hop_limit: self.hop_limit,
            scope: self.scope,
            join_state: JoinState(0),
            proxy_join: false,
        }
    }

    /// One member's record.
    pub fn member_record(&self, port: Guid) -> Option<mcr::Repr> {
        let m = self.members.get(&port)?;
        Some(mcr::Repr {
            port_gid: m.port_gid,
            join_state: m.join_state,
            proxy_join: m.proxy,
            ..self.record()
        })
    }

    /// Copies the group's parameters into an answer, as OpenSM's join response does.
    fn fill(&self, out: &mut mcr::Repr) {
        out.mgid = self.mgid;
        out.q_key = self.q_key;
        out.mlid = self.mlid;
        out.tclass = self.tclass;
        out.p_key = self.p_key;
        out.sl = self.sl;
        out.flow_label = self.flow_label;
        out.hop_limit = self.hop_limit;
        out.scope = self.scope;
        out.mtu_selector = Selector::Exactly;
        out.mtu = self.mtu;
        out.rate_selector = Selector::Exactly;
        out.rate = self.rate;
        out.packet_life_time_selector = Selector::Exactly;
        out.packet_life_time = self.packet_life_time;
    }
}

/// The MLID pool: 0xC000 upwards, the lowest free first, reused once freed, bounded by the
/// switches' MulticastFDBCap (the smallest of them: every switch must hold every MLID).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MlidPool {
    capacity: u16,
    /// Owner of each MLID by offset from 0xC000.
    owners: Vec<Option<Gid>>,
}

impl MlidPool {
    /// A pool of `capacity` MLIDs (at most [`MAX_MLIDS`]).
    pub fn new(capacity: u16) -> MlidPool {
        MlidPool {
            capacity: capacity.min(MAX_MLIDS),
            owners: Vec::new(),
        }
    }

    /// MLIDs the pool hands out.
    pub fn capacity(&self) -> u16 {
        self.capacity
    }

    /// Changes the capacity; MLIDs in use beyond it stay in use (see
    /// [`MlidPool::beyond_capacity`]).
    pub fn set_capacity(&mut self, capacity: u16) {
        self.capacity = capacity.min(MAX_MLIDS);
    }

    fn offset(mlid: Lid) -> Option<usize> {
        (mlid.is_multicast() && mlid.0 - FIRST_MLID.0 < MAX_MLIDS)
            .then(|| (mlid.0 - FIRST_MLID.0) as usize)
    }

    /// The group holding `mlid`.
    pub fn owner(&self, mlid: Lid) -> Option<Gid> {
        Self::offset(mlid).and_then(|o| self.owners.get(o).copied().flatten())
    }

    /// MLIDs in use.
    pub fn in_use(&self) -> usize {
        self.owners.iter().filter(|o| o.is_some()).count()
    }

    /// The highest MLID in use.
    pub fn top(&self) -> Option<Lid> {
        self.owners
            .iter()
            .rposition(Option::is_some)
            .map(|o| Lid(FIRST_MLID.0 + o as u16))
    }

    /// MLIDs in use beyond the capacity (after it shrank).
    pub fn beyond_capacity(&self) -> Vec<Lid> {
        self.owners
            .iter()
            .enumerate()
            .skip(self.capacity as usize)
            .filter(|(_, o)| o.is_some())
            .map(|(i, _)| Lid(FIRST_MLID.0 + i as u16))
            .collect()
    }

    /// Takes the lowest free MLID for `owner`.
    pub fn alloc(&mut self, owner: Gid) -> Option<Lid> {
        let cap = self.capacity as usize;
        let free = self.owners.iter().take(cap).position(Option::is_none);
        let o = match free {
            Some(o) => o,
            None if self.owners.len() < cap => {
                self.owners.push(None);
                self.owners.len() - 1
            }
            None => return None,
        };
        self.owners[o] = Some(owner);
        Some(Lid(FIRST_MLID.0 + o as u16))
    }

    /// Takes `mlid` for `owner` if it is free and within the capacity.
    pub fn alloc_exact(&mut self, mlid: Lid, owner: Gid) -> bool {
        let Some(o) = Self::offset(mlid).filter(|&o| o < self.capacity as usize) else {
            return false;
        };
        if self.owners.len() <= o {
            self.owners.resize(o + 1, None);
        }
        if self.owners[o].is_some() {
            return false;
        }
        self.owners[o] = Some(owner);
        true
    }

    /// Frees `mlid`; false when it was not in use.
    pub fn free(&mut self, mlid: Lid) -> bool {
        let Some(slot) = Self::offset(mlid).and_then(|o| self.owners.get_mut(o)) else {
            return false;
        };
        let was = slot.take().is_some();
        while self.owners.last() == Some(&None) {
            self.owners.pop();
        }
        was
    }
}

/// Registry settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McConfig {
    /// The subnet's GID prefix.
    pub subnet_prefix: u64,
    /// MLIDs available: the smallest MulticastFDBCap of the switches.
    pub mlid_capacity: u16,
    /// Packet lifetime of groups whose creator gave none, and of partition groups
    /// (OpenSM's subnet_timeout, 18).
    pub packet_life_time: u8,
    /// Check a join's components against the existing group (OpenSM's
    /// `mcgroup_join_validation`, on).
    pub join_validation: bool,
    /// Check IPoIB groups against their broadcast group when created (OpenSM's
    /// `ipoib_mcgroup_creation_validation`, on).
    pub ipoib_create_validation: bool,
    /// QoS is on: partition groups take their configured SL (else SL 0, as OpenSM).
    pub qos: bool,
}

impl Default for McConfig {
    fn default() -> Self {
        McConfig {
            subnet_prefix: DEFAULT_SUBNET_PREFIX,
            mlid_capacity: MAX_MLIDS,
            packet_life_time: 18,
            join_validation: true,
            ipoib_create_validation: true,
            qos: false,
        }
    }
}

/// One MCMemberRecord request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McRequest {
    pub record: mcr::Repr,
    pub comp_mask: u64,
    /// Port GUID of the port that sent it (the SA resolves the MAD's source).
    pub requester: Guid,
}

/// A report for subscribers of traps 66 / 67.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum McNotice {
    /// Trap 66: the group got its first full member.
    Created(Gid),
    /// Trap 67: the group lost its last full member.
    Deleted(Gid),
}

/// What a join did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JoinOutcome {
    /// The answer (SubnAdmGetResp).
    pub record: mcr::Repr,
    pub mgid: Gid,
    pub mlid: Lid,
    /// The join created the group.
    pub created: bool,
    /// The group's spanning tree must be recomputed (a new port, or a port that starts
    /// receiving).
    pub reroute: bool,
    pub notice: Option<McNotice>,
}

/// What a leave did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaveOutcome {
    /// The answer: the request with the port's remaining JoinState.
    pub record: mcr::Repr,
    pub mgid: Gid,
    pub mlid: Lid,
    /// The group is gone (its MLID is free; clear it from every MFT).
    pub deleted: bool,
    /// The group's tree must be recomputed.
    pub reroute: bool,
    pub notice: Option<McNotice>,
}

/// A change made by a batch operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum McEvent {
    /// A group was created (no member yet for partition groups).
    Created { mgid: Gid, mlid: Lid },
    /// A group was deleted; its MLID must be cleared from every MFT.
    Deleted { mgid: Gid, mlid: Lid },
    /// A group's members changed; its tree must be recomputed.
    Reroute { mgid: Gid, mlid: Lid },
    /// A trap to report.
    Notice(McNotice),
}

/// What [`McRegistry::apply_partitions`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartitionSync {
    pub events: Vec<McEvent>,
    /// Groups that could not be created, and why.
    pub failed: Vec<(Gid, McError)>,
}

/// The registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McRegistry {
    config: McConfig,
    groups: BTreeMap<Gid, Group>,
    pool: MlidPool,
    /// Next counter of SA-assigned MGIDs.
    mgid_counter: u32,
}

impl Default for McRegistry {
    fn default() -> Self {
        McRegistry::new(McConfig::default())
    }
}

fn mgid_signature(mgid: &Gid) -> u16 {
    u16::from_be_bytes([mgid.0[2], mgid.0[3]])
}

fn scope_of(mgid: &Gid) -> Scope {
    Scope::from_raw_value(mgid.0[1] & 0x0f)
}

fn mtu_valid(m: Mtu) -> bool {
    m.bytes().is_some()
}

fn rate_valid(r: Rate) -> bool {
    r.mbps().is_some()
}

/// `value` satisfies `selector` relative to `asked` (`ord` = value compared with asked).
fn selected(selector: Selector, ord: Option<std::cmp::Ordering>) -> bool {
    use std::cmp::Ordering::*;
    match (selector, ord) {
        (Selector::GreaterThan, Some(o)) => o == Greater,
        (Selector::LessThan, Some(o)) => o == Less,
        (Selector::Exactly, Some(o)) => o == Equal,
        (Selector::GreaterThan | Selector::LessThan | Selector::Exactly, None) => false,
        _ => true,
    }
}

impl McRegistry {
    /// An empty registry.
    pub fn new(config: McConfig) -> McRegistry {
        McRegistry {
            config,
            groups: BTreeMap::new(),
            pool: MlidPool::new(config.mlid_capacity),
            mgid_counter: 0,
        }
    }

    /// The settings.
    pub fn config(&self) -> &McConfig {
        &self.config
    }

    /// Replaces the settings (the subnet's prefix, timeout or QoS changed): groups already
    /// there keep their parameters; the MLID capacity is applied as
    /// [`McRegistry::set_mlid_capacity`] does. Returns the groups beyond the capacity.
    pub fn set_config(&mut self, config: McConfig) -> Vec<Gid> {
        self.config = config;
        self.set_mlid_capacity(config.mlid_capacity)
    }

    /// Sets the MLID capacity (the switches' smallest MulticastFDBCap); returns the groups
    /// whose MLID is now beyond it (they stay; the caller decides).
    pub fn set_mlid_capacity(&mut self, capacity: u16) -> Vec<Gid> {
        self.config.mlid_capacity = capacity.min(MAX_MLIDS);
        self.pool.set_capacity(capacity);
        self.pool
            .beyond_capacity()
            .into_iter()
            .filter_map(|l| self.pool.owner(l))
            .collect()
    }

    /// The MLID pool.
    pub fn mlids(&self) -> &MlidPool {
        &self.pool
    }

    /// Every group, in MGID order.
    pub fn groups(&self) -> impl Iterator<Item = &Group> + '_ {
        self.groups.values()
    }

    /// Number of groups.
    pub fn len(&self) -> usize {
        self.groups.len()
    }

    /// No groups.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// The group of an MGID.
    pub fn get(&self, mgid: &Gid) -> Option<&Group> {
        self.groups.get(mgid)
    }

    /// The group on an MLID.
    pub fn by_mlid(&self, mlid: Lid) -> Option<&Group> {
        self.pool.owner(mlid).and_then(|g| self.groups.get(&g))
    }

    /// The PortGID with the default prefix replaced, or the error for a foreign prefix.
    fn port_gid(&self, gid: Gid) -> Result<Gid, McError> {
        let prefix = gid.prefix();
        if prefix == DEFAULT_SUBNET_PREFIX || prefix == self.config.subnet_prefix {
            Ok(Gid::new(self.config.subnet_prefix, gid.guid()))
        } else {
            Err(McError::ForeignPrefix { prefix })
        }
    }

    fn check_common(&self, req: &McRequest) -> Result<Gid, McError> {
        let cm = req.comp_mask;
        if cm & JOIN_COMPS != JOIN_COMPS {
            return Err(McError::InsufficientComponents {
                got: cm,
                missing: JOIN_COMPS & !cm,
            });
        }
        let r = &req.record;
        let both = |a: u64, b: u64| cm & a != 0 && cm & b != 0;
        if both(comp::MTU, comp::MTU_SELECTOR) && !mtu_valid(r.mtu) {
            return Err(McError::BadCode {
                what: "MTU",
                code: r.mtu.to_raw_value(),
            });
        }
        if both(comp::RATE, comp::RATE_SELECTOR) && !rate_valid(r.rate) {
            return Err(McError::BadCode {
                what: "rate",
                code: r.rate.to_raw_value(),
            });
        }
        self.port_gid(r.port_gid)
    }

    /// Handles a join (SubnAdmSet(MCMemberRecord)); see the module doc for the rules.
    ///
    /// An MGID of zero is assigned: `ff1S:a01b:PPPP:PPPP:PPPP:PPPP:CCCC:CCCC`, `S` the
    /// request's scope when the mask names Scope (else link-local), `P` the subnet prefix,
    /// `C` a counter, the first unused of 1000 tries (else `ERR_NO_RESOURCES`).
    pub fn join(
        &mut self,
        ports: &dyn PortDirectory,
        req: &McRequest,
    ) -> Result<JoinOutcome, McError> {
        let port_gid = self.check_common(req)?;
        let r = &req.record;
        let cm = req.comp_mask;
        let port = port_gid.guid();
        let caps = ports.port(port).ok_or(McError::UnknownPort(port))?;
        let requester = ports
            .port(req.requester)
            .ok_or(McError::UnknownPort(req.requester))?;
        let proxy = req.requester != port;
        if proxy && !share_pkey(caps.pkeys, requester.pkeys) {
            return Err(McError::NoSharedPartition {
                port,
                requester: req.requester,
            });
        }
        if cm & comp::P_KEY != 0 && r.p_key.is_invalid() {
            return Err(McError::InvalidPKey(r.p_key));
        }
        let js = JoinState(r.join_state.0 & 0xF);

        let new_group = match self.groups.get(&r.mgid) {
            Some(g) => {
                if self.config.join_validation {
                    other_fields_match(cm, r, g)?;
                }
                None
            }
            None => Some(self.new_group(req, caps, port)?),
        };
        let g = match &new_group {
            Some(g) => g,
            None => self.groups.get(&r.mgid).ok_or(McError::NoGroup(r.mgid))?,
        };
        selectors_hold(cm, r, g)?;
        if caps.mtu.bytes().unwrap_or(0) < g.mtu.bytes().unwrap_or(0) {
            return Err(McError::PortTooSlow { port, what: "MTU" });
        }
        if !matches!(
            caps.rate.cmp_speed(g.rate),
            Some(std::cmp::Ordering::Greater | std::cmp::Ordering::Equal)
        ) {
            return Err(McError::PortTooSlow { port, what: "rate" });
        }
        if js.is_empty() {
            return Err(McError::EmptyJoinState);
        }
        if !has_pkey(caps.pkeys, g.p_key) {
            return Err(McError::NotInPartition {
                port,
                pkey: g.p_key,
            });
        }
        if new_group.is_none() {
            if let Some(m) = g.members.get(&port) {
                check_modify(m, g, port, req.requester, requester.pkeys)?;
            }
        }

        let created = new_group.is_some();
        let mgid = match new_group {
            Some(mut g) => {
                let mgid = g.mgid;
                let asked = cm & comp::MLID != 0 && self.pool.alloc_exact(r.mlid, mgid);
                g.mlid = if asked {
                    r.mlid
                } else {
                    self.pool.alloc(mgid).ok_or(McError::NoMlid {
                        capacity: self.pool.capacity(),
                    })?
                };
                self.groups.insert(mgid, g);
                mgid
            }
            None => r.mgid,
        };
        let g = self.groups.get_mut(&mgid).ok_or(McError::NoGroup(mgid))?;
        let full_before = g.full_members();
        let (reroute, total) = match g.members.get_mut(&port) {
            Some(m) => {
                let was = m.receives();
                m.join_state = m.join_state.union(js);
                (m.receives() != was, m.join_state)
            }
            None => {
                g.members.insert(
                    port,
                    Member {
                        port_gid,
                        join_state: js,
                        proxy,
                    },
                );
                (true, js)
            }
        };
        let notice = (full_before == 0 && g.full_members() > 0).then_some(McNotice::Created(mgid));
        let mut record = *r;
        g.fill(&mut record);
        record.join_state = total;
        Ok(JoinOutcome {
            record,
            mgid,
            mlid: g.mlid,
            created,
            reroute,
            notice,
        })
    }

    /// Builds the group a create request asks for (MLID not yet taken).
    fn new_group(
        &mut self,
        req: &McRequest,
        caps: PortCaps<'_>,
        port: Guid,
    ) -> Result<Group, McError> {
        let r = &req.record;
        let cm = req.comp_mask;
        let js = JoinState(r.join_state.0 & 0xF);
        if js.0 & KEEPS_ALIVE.0 == 0 {
            return Err(McError::CreateNeedsFullMember(js));
        }
        if cm & CREATE_COMPS != CREATE_COMPS {
            return Err(McError::InsufficientComponents {
                got: cm,
                missing: CREATE_COMPS & !cm,
            });
        }
        let mgid = if r.mgid == Gid::default() {
            self.assign_mgid(cm, r)?
        } else {
            self.check_requested_mgid(cm, r)?;
            r.mgid
        };
        let mtu =
            realize_mtu(cm, r, caps.mtu).ok_or(McError::NotRealizable { what: "MTU", port })?;
        let rate =
            realize_rate(cm, r, caps.rate).ok_or(McError::NotRealizable { what: "rate", port })?;
        let packet_life_time = if cm & comp::PACKET_LIFE_TIME != 0 {
            r.packet_life_time
        } else {
            self.config.packet_life_time
        };
        Ok(Group {
            mgid,
            mlid: Lid(0),
            q_key: r.q_key,
            p_key: r.p_key,
            mtu,
            rate,
            packet_life_time,
            sl: r.sl,
            flow_label: r.flow_label,
            hop_limit: r.hop_limit,
            scope: scope_of(&mgid),
            tclass: r.tclass,
            well_known: false,
            created_with: js,
            members: BTreeMap::new(),
        })
    }

    fn assign_mgid(&mut self, cm: u64, r: &mcr::Repr) -> Result<Gid, McError> {
        let scope = if cm & comp::SCOPE != 0 {
            r.scope.to_raw_value() & 0x0f
        } else {
            Scope::LinkLocal.to_raw_value()
        };
        let mut g = [0u8; 16];
        g[0] = 0xff;
        g[1] = 0x10 | scope;
        g[2..4].copy_from_slice(&SA_SIGNATURE.to_be_bytes());
        g[4..12].copy_from_slice(&self.config.subnet_prefix.to_be_bytes());
        for _ in 0..1000 {
            g[12..].copy_from_slice(&self.mgid_counter.to_be_bytes());
            self.mgid_counter = self.mgid_counter.wrapping_add(1);
            if !self.groups.contains_key(&Gid(g)) {
                return Ok(Gid(g));
            }
        }
        Err(McError::NoMgid)
    }

    fn check_requested_mgid(&self, cm: u64, r: &mcr::Repr) -> Result<(), McError> {
        let mgid = r.mgid;
        let bad = |why| Err(McError::BadMgid { mgid, why });
        if mgid.0[0] != 0xff {
            return bad("a multicast GID starts with 0xFF");
        }
        if !self.config.ipoib_create_validation {
            return Ok(());
        }
        let sig = mgid_signature(&mgid);
        if sig == IPV4_SIGNATURE || sig == IPV6_SIGNATURE {
            // The partition's broadcast group: same scope, same P_Key bytes.
            let mut b = [0u8; 16];
            b[..4].copy_from_slice(&[0xff, 0x10 | (mgid.0[1] & 0x0f), 0x40, 0x1b]);
            b[4..6].copy_from_slice(&mgid.0[4..6]);
            b[12..].copy_from_slice(&[0xff; 4]);
            let bcast = Gid(b);
            if sig != IPV4_SIGNATURE || bcast != mgid {
                let Some(b) = self.groups.get(&bcast) else {
                    return Err(McError::NoBroadcastGroup {
                        mgid,
                        broadcast: bcast,
                    });
                };
                other_fields_match(cm, r, b)?;
            }
            return Ok(());
        }
        if mgid.0[1] & 0xe0 != 0 {
            return bad("reserved flag bits are set");
        }
        if sig == SA_SIGNATURE && scope_of(&mgid) == Scope::LinkLocal {
            return bad("the SA signature 0xA01B in link-local scope is the SA's to assign");
        }
        Ok(())
    }

    /// Handles a leave (SubnAdmDelete(MCMemberRecord)); see the module doc for the rules.
    pub fn leave(
        &mut self,
        ports: &dyn PortDirectory,
        req: &McRequest,
    ) -> Result<LeaveOutcome, McError> {
        let port_gid = self.check_common(req)?;
        let r = &req.record;
        let port = port_gid.guid();
        let g = self.groups.get(&r.mgid).ok_or(McError::NoGroup(r.mgid))?;
        let m = *g
            .members
            .get(&port)
            .ok_or(McError::NotAMember { port, mgid: r.mgid })?;
        let asked = JoinState(r.join_state.0 & 0xF);
        if asked.0 & m.join_state.0 == 0 || asked.0 & !m.join_state.0 != 0 {
            return Err(McError::JoinStateMismatch {
                asked,
                held: m.join_state,
            });
        }
        let req_pkeys = ports.port(req.requester).map_or(&[][..], |c| c.pkeys);
        check_modify(&m, g, port, req.requester, req_pkeys)?;
        let remaining = m.join_state.without(asked);
        let (mgid, mlid) = (g.mgid, g.mlid);
        let mut events = Vec::new();
        self.set_member(mgid, port, remaining, &mut events);
        let mut out = LeaveOutcome {
            record: *r,
            mgid,
            mlid,
            deleted: false,
            reroute: false,
            notice: None,
        };
        out.record.join_state = remaining;
        for e in events {
            match e {
                McEvent::Deleted { .. } => out.deleted = true,
                McEvent::Reroute { .. } => out.reroute = true,
                McEvent::Notice(n) => out.notice = Some(n),
                McEvent::Created { .. } => {}
            }
        }
        Ok(out)
    }

    /// Gives `port` the JoinState `js` in group `mgid` (empty = no member), applying the
    /// deletion rule; pushes what changed.
    fn set_member(&mut self, mgid: Gid, port: Guid, js: JoinState, events: &mut Vec<McEvent>) {
        let Some(g) = self.groups.get_mut(&mgid) else {
            return;
        };
        let Some(m) = g.members.get(&port).copied() else {
            return;
        };
        let full_before = g.full_members();
        if js.is_empty() {
            g.members.remove(&port);
        } else if let Some(slot) = g.members.get_mut(&port) {
            slot.join_state = js;
        }
        let receives_after = js.0 & RECEIVING.0 != 0;
        let mut reroute = js.is_empty() || m.receives() != receives_after;
        if full_before > 0 && g.full_members() == 0 {
            events.push(McEvent::Notice(McNotice::Deleted(mgid)));
            // Nobody keeps it alive: every member goes, and so does the group unless it is
            // well known.
            reroute |= !g.members.is_empty();
            g.members.clear();
            if !g.well_known {
                let mlid = g.mlid;
                self.groups.remove(&mgid);
                self.pool.free(mlid);
                events.push(McEvent::Deleted { mgid, mlid });
                return;
            }
        }
        if reroute {
            events.push(McEvent::Reroute { mgid, mlid: g.mlid });
        }
    }

    /// A port left the fabric: it leaves every group, with the deletion rule.
    pub fn drop_port(&mut self, port: Guid) -> Vec<McEvent> {
        let mgids: Vec<Gid> = self
            .groups
            .values()
            .filter(|g| g.members.contains_key(&port))
            .map(|g| g.mgid)
            .collect();
        let mut events = Vec::new();
        for mgid in mgids {
            self.set_member(mgid, port, JoinState(0), &mut events);
        }
        events
    }

    /// Creates the groups the partitions configuration defines (the IPoIB broadcast group
    /// of every `ipoib` partition, then its `mgid=` groups, one per scope), marks them well
    /// known (an existing group of that MGID is kept as it is and marked), and drops the
    /// mark from groups no longer configured, deleting those without full members.
    pub fn apply_partitions(&mut self, parts: &Partitions) -> PartitionSync {
        let mut out = PartitionSync::default();
        let mut wanted: Vec<Gid> = Vec::new();
        for p in &parts.partitions {
            let pkey = PKey(p.pkey.0 | 0x8000);
            let groups = p
                .broadcast
                .iter()
                .map(|g| (g, true))
                .chain(p.mgroups.iter().map(|g| (g, false)));
            for (cg, is_bcast) in groups {
                let sl = match (self.config.qos, is_bcast) {
                    (true, _) => cg.flags.sl,
                    // OpenSM zeroes the partition's SL without QoS; an mgid line's own sl=
                    // survives.
                    (false, false) if cg.flags.sl != p.sl => cg.flags.sl,
                    (false, _) => Sl(0),
                };
                for (mgid, scope) in cg.mgids() {
                    wanted.push(mgid);
                    if let Some(g) = self.groups.get_mut(&mgid) {
                        g.well_known = true;
                        continue;
                    }
                    match self.pool.alloc(mgid) {
                        Some(mlid) => {
                            let g = self.partition_group(mgid, mlid, pkey, scope, sl, &cg.flags);
                            self.groups.insert(mgid, g);
                            out.events.push(McEvent::Created { mgid, mlid });
                        }
                        None => out.failed.push((
                            mgid,
                            McError::NoMlid {
                                capacity: self.pool.capacity(),
                            },
                        )),
                    }
                }
            }
        }
        wanted.sort_unstable();
        let stale: Vec<Gid> = self
            .groups
            .values()
            .filter(|g| g.well_known && wanted.binary_search(&g.mgid).is_err())
            .map(|g| g.mgid)
            .collect();
        for mgid in stale {
            let Some(g) = self.groups.get_mut(&mgid) else {
                continue;
            };
            g.well_known = false;
            if g.full_members() == 0 {
                let mlid = g.mlid;
                self.groups.remove(&mgid);
                self.pool.free(mlid);
                out.events.push(McEvent::Deleted { mgid, mlid });
            }
        }
        out
    }

    fn partition_group(
        &self,
        mgid: Gid,
        mlid: Lid,
        pkey: PKey,
        scope: Scope,
        sl: Sl,
        f: &GroupFlags,
    ) -> Group {
        Group {
            mgid,
            mlid,
            q_key: f.q_key,
            p_key: pkey,
            mtu: f.mtu,
            rate: f.rate,
            packet_life_time: self.config.packet_life_time,
            sl,
            flow_label: f.flow_label,
            hop_limit: if scope == Scope::LinkLocal {
                0
            } else {
                MAX_HOP_LIMIT
            },
            scope,
            tclass: f.tclass,
            well_known: true,
            created_with: JoinState::FULL_MEMBER,
            members: BTreeMap::new(),
        }
    }

    /// Answers SubnAdmGet / GetTable(MCMemberRecord), as OpenSM matches: groups in MGID
    /// order whose partition the requester holds and whose components match the request;
    /// with PortGID in the mask, that member's record; else, for a trusted requester (a
    /// valid non-zero SM_Key), one record per member matching the Scope / JoinState
    /// components, and for anyone else the group's record. Untrusted answers carry no
    /// PortGID, JoinState or ProxyJoin.
    pub fn query(
        &self,
        rec: &mcr::Repr,
        comp_mask: u64,
        requester_pkeys: &[PKey],
        trusted: bool,
    ) -> Vec<mcr::Repr> {
        let cm = comp_mask;
        let mut out = Vec::new();
        let mut mask = 0u8;
        if cm & comp::SCOPE != 0 {
            mask |= 0xf0;
        }
        if cm & comp::JOIN_STATE != 0 {
            mask |= 0x0f;
        }
        let state = |scope: Scope, js: JoinState| ((scope.to_raw_value() & 0xf) << 4) | js.0;
        let want = state(rec.scope, rec.join_state) & mask;
        for g in self.groups.values() {
            if (cm & comp::MGID != 0 && rec.mgid != g.mgid)
                || (cm & comp::MLID != 0 && rec.mlid != g.mlid)
                || !has_pkey(requester_pkeys, g.p_key)
                || other_fields_match(cm, rec, g).is_err()
                || (cm & comp::PROXY_JOIN != 0 && rec.proxy_join)
                || selectors_hold(cm, rec, g).is_err()
            {
                continue;
            }
            if cm & comp::PORT_GID != 0 {
                let Some(r) = g.member_record(rec.port_gid.guid()) else {
                    continue;
                };
                if state(r.scope, r.join_state) & mask == want {
                    out.push(r);
                }
            } else if trusted {
                for (guid, m) in g.members() {
                    if state(g.scope, m.join_state) & mask == want {
                        out.extend(g.member_record(guid));
                    }
                }
            } else if state(g.scope, g.created_with) & mask == want {
                out.push(mcr::Repr {
                    join_state: g.created_with,
                    ..g.record()
                });
            }
        }
        if !trusted {
            for r in &mut out {
                r.port_gid = Gid::default();
                r.join_state = JoinState(0);
                r.proxy_join = false;
            }
        }
        out
    }
}

/// o15-0.2.1: who may change a membership.
fn check_modify(
    m: &Member,
    g: &Group,
    port: Guid,
    requester: Guid,
    requester_pkeys: &[PKey],
) -> Result<(), McError> {
    let ok = if m.proxy {
        has_pkey(requester_pkeys, g.p_key)
    } else {
        requester == port
    };
    if ok {
        Ok(())
    } else {
        Err(McError::NotAllowed { port, requester })
    }
}

/// The request's Q_Key, P_Key, TClass, SL, FlowLabel and HopLimit components match the
/// group.
fn other_fields_match(cm: u64, r: &mcr::Repr, g: &Group) -> Result<(), McError> {
    let miss = |field| Err(McError::Mismatch { field });
    if cm & comp::Q_KEY != 0 && r.q_key != g.q_key {
        return miss("Q_Key");
    }
    if cm & comp::P_KEY != 0
        && (!(r.p_key.is_full() || g.p_key.is_full()) || r.p_key.base() != g.p_key.base())
    {
        return miss("P_Key");
    }
    if cm & comp::TCLASS != 0 && r.tclass != g.tclass {
        return miss("TClass");
    }
    if cm & comp::SL != 0 && r.sl != g.sl {
        return miss("SL");
    }
    if cm & comp::FLOW_LABEL != 0 && r.flow_label != g.flow_label {
        return miss("FlowLabel");
    }
    if cm & comp::HOP_LIMIT != 0 && r.hop_limit != g.hop_limit {
        return miss("HopLimit");
    }
    Ok(())
}

/// The MTU and rate selectors of the request hold for the group's values (checked when the
/// selector is in the mask, as OpenSM).
fn selectors_hold(cm: u64, r: &mcr::Repr, g: &Group) -> Result<(), McError> {
    if cm & comp::MTU_SELECTOR != 0 {
        let ord = Some(g.mtu.to_raw_value().cmp(&r.mtu.to_raw_value()));
        if !selected(r.mtu_selector, ord) {
            return Err(McError::Mismatch { field: "MTU" });
        }
    }
    if cm & comp::RATE_SELECTOR != 0 && !selected(r.rate_selector, g.rate.cmp_speed(r.rate)) {
        return Err(McError::Mismatch { field: "rate" });
    }
    Ok(())
}

/// The MTU of a group being created: the port's unless asked for with a selector.
fn realize_mtu(cm: u64, r: &mcr::Repr, port: Mtu) -> Option<Mtu> {
    let given = cm & comp::MTU != 0 && cm & comp::MTU_SELECTOR != 0;
    if !given || r.mtu_selector == Selector::Largest {
        return mtu_valid(port).then_some(port);
    }
    let asked = r.mtu.to_raw_value();
    let p = port.to_raw_value();
    let code = match r.mtu_selector {
        Selector::GreaterThan => {
            if asked >= p {
                return None;
            }
            p
        }
        Selector::LessThan => {
            if asked > p {
                p
            } else {
                asked.checked_sub(1)?
            }
        }
        _ => asked,
    };
    let m = Mtu::from_raw_value(code);
    mtu_valid(m).then_some(m)
}

/// The rate of a group being created: the port's unless asked for with a selector.
fn realize_rate(cm: u64, r: &mcr::Repr, port: Rate) -> Option<Rate> {
    use std::cmp::Ordering::*;
    let given = cm & comp::RATE != 0 && cm & comp::RATE_SELECTOR != 0;
    if !given || r.rate_selector == Selector::Largest {
        return rate_valid(port).then_some(port);
    }
    let asked = r.rate;
    let rate = match r.rate_selector {
        Selector::GreaterThan => match asked.cmp_speed(port)? {
            Less => port,
            _ => return None,
        },
        Selector::LessThan => match asked.cmp_speed(port)? {
            Greater => port,
            _ => asked.slower()?,
        },
        _ => asked,
    };
    rate_valid(rate).then_some(rate)
}

#[cfg(test)]
mod tests;
