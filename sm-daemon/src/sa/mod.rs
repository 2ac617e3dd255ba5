//! The Subnet Administrator (IBA 15), a sans-IO state machine like the SM core that owns it.
//!
//! The core hands every class-0x03 MAD to [`Server::handle_mad`] with the requester's
//! address ([`Requester`]: LRH source LID, source QP, SL, P_Key index); the server queues
//! [`Reply`]s addressed back to it, which the core turns into transmits. Timers (RMPP
//! retransmission, abandoned transfers) go through [`Server::poll_timeout`] and
//! [`Server::handle_timeout`]. Answers come from a [`Db`], the snapshot of the subnet the
//! core installs after each heavy sweep ([`Server::set_db`]); until then the SA stays
//! silent, as IBA C15-0.1.3 requires of an SM that is not yet master of a subnet that is up.
//!
//! # What is answered
//!
//! - Methods: `Get` (exactly one record, else ERR_NO_RECORDS / ERR_TOO_MANY_RECORDS),
//!   `GetTable` (every match, through RMPP), `GetMulti` (MultiPathRecord, through RMPP both
//!   ways). `Set` / `Delete` exist for none of the records served here: 0x000C.
//! - Attributes: ClassPortInfo and the records of [`records::HANDLERS`]. An unknown
//!   attribute is MAD status 0x000C (method/attribute combination not supported), a method
//!   the SA class does not have 0x0008, a base or class version other than 1 / 2 0x0004.
//! - Malformed queries (short MAD, component mask bits beyond the record's components, an
//!   AttributeOffset that is not the record's, a template that does not parse, an unknown
//!   requester) are ERR_REQ_INVALID; a query lacking a component it needs (PathRecord
//!   without DGID/DLID, half a ServiceID) is ERR_REQ_INSUFFICIENT_COMPONENTS.
//! - Error answers echo the request with the status set, SM_Key 0, the response method
//!   (`Set` -> `GetResp`), AttributeOffset 0 for `GetTable`, PathRecord as the attribute of
//!   a MultiPathRecord query, and no RMPP, as OpenSM does.
//! - SM_Key: a request whose SM_Key is neither 0 nor ours is discarded (IBA C15-0.1.5 and
//!   OpenSM); one carrying ours is trusted: PortInfoRecord shows M_Keys, P_KeyTableRecord is
//!   answered (untrusted: ERR_REQ_INVALID, as OpenSM).
//!
//! # RMPP, per transport
//!
//! [`RmppMode::Segment`] (the simulated fabric, which carries 256-byte MADs): the server cuts
//! table answers into DATA segments and runs the sm-mad [`RmppSender`] on the core's clock,
//! consuming the requester's ACK / STOP / ABORT; multi-segment requests (GetMulti) are
//! reassembled with an [`RmppReceiver`]. [`RmppMode::Kernel`] (the kernel umad transport,
//! whose SA agent is registered with `rmpp_version` 1): the kernel segments, acknowledges and
//! reassembles; the server hands it each table answer as one long MAD (MAD and SA headers,
//! RMPP Active, then every record) and receives requests already reassembled.

mod db;
mod inform;
mod mask;
mod mcast;
mod path;
mod records;
mod service;

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::time::Duration;

use sm_core::mcast::{McConfig, McEvent, McNotice, McRegistry};
use sm_core::partitions::Partitions;
use sm_mad::mad::{self, MadStatus, Method, MgmtClass};
use sm_mad::rmpp::{
    self, ReceiverState, RmppFlags, RmppReceiver, RmppSender, RmppType, Segmenter, SenderConfig,
    SenderState,
};
use sm_mad::{Gid, Guid, Lid, Tid, attr, notice, sa};

pub use db::{Db, DbParams, port_rate, reconstructed};
pub use inform::ReportStats;

use crate::core::time::Instant;
use records::{Out, Query, Run};

/// How table answers reach the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RmppMode {
    /// The server segments and runs RMPP itself (256-byte MADs only).
    #[default]
    Segment,
    /// The transport's kernel agent does RMPP: answers go out as one long MAD.
    Kernel,
}

/// SA settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SaConfig {
    pub rmpp: RmppMode,
    /// The SM_Key a trusted requester presents (OpenSM's default `sa_key` is 1).
    pub sa_key: u64,
    /// ClassPortInfo.RespTimeValue (4.096 us x 2^value; OpenSM answers 16).
    pub resp_time_value: u8,
    /// RMPP: how long to wait for an ACK before going back.
    pub ack_timeout: Duration,
    /// RMPP: timeouts in a row before a transfer is abandoned.
    pub max_retries: u32,
    /// RMPP transfers in progress at once; beyond, queries get ERR_NO_RESOURCES.
    pub max_transfers: usize,
    /// A multi-segment request that stops arriving is dropped after this long.
    pub receive_timeout: Duration,
    /// Largest answer, in bytes of records.
    pub max_payload: usize,
    /// Report(Notice): how long to wait for the ReportResp before sending again.
    pub report_timeout: Duration,
    /// Report(Notice): resends before giving up.
    pub report_retries: u32,
    /// Drop a port's event subscriptions when it leaves the subnet (OpenSM's
    /// `drop_event_subscriptions`, which OpenSM leaves off: its subscriptions outlive the
    /// port and their Reports time out).
    pub drop_event_subscriptions: bool,
    /// ClassPortInfo claims IsMulticastFDBTopSupported (the core sets MulticastFDBTop on the
    /// switches that support it, OpenSM's `use_mfttop`).
    pub mcast_top: bool,
    /// Most registered services, and most event subscriptions, at once.
    pub max_entries: usize,
}

impl Default for SaConfig {
    fn default() -> Self {
        SaConfig {
            rmpp: RmppMode::Segment,
            sa_key: 1,
            resp_time_value: 16,
            ack_timeout: Duration::from_secs(2),
            max_retries: 5,
            max_transfers: 4096,
            receive_timeout: Duration::from_secs(10),
            max_payload: 16 << 20,
            report_timeout: Duration::from_secs(1),
            report_retries: 3,
            drop_event_subscriptions: true,
            mcast_top: true,
            max_entries: 65_536,
        }
    }
}

/// Where a query came from (and where its answer goes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Requester {
    /// LRH source LID.
    pub lid: Lid,
    /// Source QP (1 for libibumad clients; any QP for others).
    pub qpn: u32,
    pub sl: u8,
    pub pkey_index: u16,
}

impl Requester {
    /// A requester on QP1 at `lid`.
    pub fn at(lid: Lid) -> Requester {
        Requester {
            lid,
            qpn: 1,
            sl: 0,
            pkey_index: 0,
        }
    }
}

/// A MAD to send to a requester: 256 bytes, or longer for a kernel-RMPP table answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub to: Requester,
    pub mad: Vec<u8>,
    /// A request of the SA's own (Report) that expects a response: the kernel transport
    /// gives it a timeout so the ReportResp is matched to it.
    pub expects_response: bool,
}

impl Reply {
    fn answer(to: Requester, mad: Vec<u8>) -> Reply {
        Reply {
            to,
            mad,
            expects_response: false,
        }
    }
}

/// Counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct SaStats {
    /// Requests answered (records or an error status).
    pub queries: u64,
    /// Answers with an error status.
    pub errors: u64,
    /// MADs dropped: not for us, unanswerable, before the subnet was up, wrong SM_Key.
    pub dropped: u64,
    /// RMPP transfers completed and failed.
    pub transfers_done: u64,
    pub transfers_failed: u64,
}

/// An answer before it is put on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// One MAD (GetResp, or an error answer).
    Single(Box<[u8; 256]>),
    /// A table: the response header (records' AttributeOffset set) and the records.
    Table {
        header: Box<sa::Repr>,
        payload: Vec<u8>,
    },
}

type Key = (Lid, u64);

#[derive(Debug)]
struct Transfer {
    to: Requester,
    recv: Option<RmppReceiver>,
    /// The request was reassembled and answered.
    answered: bool,
    send: Option<RmppSender<Instant>>,
    /// The deadline registered in `Server::deadlines`.
    deadline: Option<Instant>,
    /// Receiving gives up then.
    recv_deadline: Instant,
}

/// What the SA keeps besides the snapshot: the multicast groups, the services, the event
/// subscriptions, and what changed that the core must act on.
#[derive(Debug, Clone, Default)]
pub(crate) struct State {
    pub(crate) mc: McRegistry,
    pub(crate) services: service::Services,
    pub(crate) informs: inform::Informs,
    /// MLIDs whose tree must be recomputed (or cleared: the group is gone).
    pub(crate) mc_changed: BTreeSet<Lid>,
    /// Traps 66 / 67 to report.
    pub(crate) mc_notices: Vec<McNotice>,
    /// Most services, and most event subscriptions, kept at once (beyond:
    /// ERR_NO_RESOURCES), so requesters cannot grow the SA without bound.
    pub(crate) max_entries: usize,
}

impl State {
    pub(crate) fn push_mc_notice(&mut self, n: Option<McNotice>) {
        self.mc_notices.extend(n);
    }

    /// Takes in what a batch operation of the registry did.
    fn take_events(&mut self, events: Vec<McEvent>) {
        for e in events {
            match e {
                McEvent::Created { mlid, .. }
                | McEvent::Deleted { mlid, .. }
                | McEvent::Reroute { mlid, .. } => {
                    self.mc_changed.insert(mlid);
                }
                McEvent::Notice(n) => self.mc_notices.push(n),
            }
        }
    }
}

/// Either a shared or an exclusive borrow of the state (a pure query runs a Set on a copy).
enum StateRef<'a> {
    Shared(&'a State),
    Mut(&'a mut State),
}

impl StateRef<'_> {
    fn get(&self) -> &State {
        match self {
            StateRef::Shared(s) => s,
            StateRef::Mut(s) => s,
        }
    }
}

/// Traps remembered to recognise a repeat (issuer LID, TID).
const RECENT_TRAPS: usize = 64;

/// The SA.
#[derive(Debug, Default)]
pub struct Server {
    cfg: SaConfig,
    db: Option<Db>,
    out: VecDeque<Reply>,
    transfers: HashMap<Key, Transfer>,
    deadlines: BTreeSet<(Instant, Key)>,
    stats: SaStats,
    /// Requests received per attribute (an RMPP request once, at its first segment).
    by_attribute: BTreeMap<u16, u64>,
    state: State,
    reports: inform::Reports,
    recent_traps: VecDeque<(Lid, u64)>,
}

fn tid_of(m: &[u8]) -> u64 {
    mad::peek_tid(m).map_or(0, |t| t.0)
}

impl Server {
    pub fn new(cfg: SaConfig) -> Server {
        Server {
            state: State {
                max_entries: cfg.max_entries,
                ..State::default()
            },
            cfg,
            ..Server::default()
        }
    }

    pub fn config(&self) -> &SaConfig {
        &self.cfg
    }

    /// Installs a new snapshot; queries are answered from then on. The multicast
    /// registry takes the subnet's parameters from it; nothing is reported (see
    /// [`Server::install`]).
    pub fn set_db(&mut self, db: Db) {
        self.configure_mc(&db);
        self.db = Some(db);
    }

    /// Installs the snapshot of a heavy sweep, as the core does: ports that left drop out
    /// of their multicast groups (and their subscriptions, with
    /// [`SaConfig::drop_event_subscriptions`]), the partitions' multicast groups are
    /// created, and traps 65 / 64 (GID out of / in service) and 66 / 67 are reported to
    /// subscribers.
    pub fn install(&mut self, now: Instant, db: Db, partitions: &Partitions) {
        let old = self.db.take();
        let ends = |d: &Db| -> BTreeSet<Guid> { d.end_port_guids().collect() };
        let new_ports = ends(&db);
        let (gone, came): (Vec<Guid>, Vec<Guid>) = match &old {
            Some(o) => {
                let before = ends(o);
                (
                    before.difference(&new_ports).copied().collect(),
                    new_ports.difference(&before).copied().collect(),
                )
            }
            None => (Vec::new(), Vec::new()),
        };
        if let Some(o) = &old {
            for &g in &gone {
                if self.cfg.drop_event_subscriptions {
                    let n = self.state.informs.drop_port(g);
                    if n > 0 {
                        tracing::debug!(port = %g, n, "event subscriptions of a port that left dropped");
                    }
                }
                // Reported while the old snapshot still knows the port (as OpenSM does).
                let gid = Gid::new(o.p.subnet_prefix, g);
                if let Some(n) = sa_notice(o, notice::trap::GID_OUT_OF_SERVICE, gid) {
                    self.forward(now, &n, o);
                }
                let events = self.state.mc.drop_port(g);
                self.state.take_events(events);
            }
        }
        self.configure_mc(&db);
        let sync = self.state.mc.apply_partitions(partitions);
        for (mgid, e) in &sync.failed {
            tracing::warn!(%mgid, "partition multicast group not created: {e}");
        }
        self.state.take_events(sync.events);
        self.db = Some(db);
        if let Some(db) = self.db.take() {
            for &g in &came {
                let gid = Gid::new(db.p.subnet_prefix, g);
                if let Some(n) = sa_notice(&db, notice::trap::GID_IN_SERVICE, gid) {
                    self.forward(now, &n, &db);
                }
            }
            self.db = Some(db);
        }
        self.flush(now);
    }

    /// The registry's settings from a snapshot: prefix, packet lifetime, QoS, and as many
    /// MLIDs as the smallest MulticastFDBCap of the switches.
    fn configure_mc(&mut self, db: &Db) {
        let cap = db
            .node_indices()
            .filter_map(|n| db.node(n).switch)
            .map(|s| s.multicast_fdb_cap)
            .filter(|&c| c > 0)
            .min()
            .unwrap_or(sm_core::mcast::MAX_MLIDS);
        let cfg = McConfig {
            subnet_prefix: db.p.subnet_prefix,
            mlid_capacity: cap,
            packet_life_time: db.p.subnet_timeout,
            qos: db.p.qos,
            ..*self.state.mc.config()
        };
        if cfg != *self.state.mc.config() {
            for mgid in self.state.mc.set_config(cfg) {
                tracing::warn!(%mgid, capacity = cap, "multicast group's MLID beyond the switches' MulticastFDBCap");
            }
        }
    }

    pub fn db(&self) -> Option<&Db> {
        self.db.as_ref()
    }

    /// The snapshot, to update what the core programs between sweeps (MFT blocks,
    /// SwitchInfo).
    pub fn db_mut(&mut self) -> Option<&mut Db> {
        self.db.as_mut()
    }

    /// The multicast groups.
    pub fn mcast(&self) -> &McRegistry {
        &self.state.mc
    }

    /// MLIDs whose spanning tree must be recomputed, or cleared from the MFTs when no group
    /// holds them any more, since the last call.
    pub fn take_mcast_changes(&mut self) -> BTreeSet<Lid> {
        std::mem::take(&mut self.state.mc_changed)
    }

    /// Whether a tree waits to be recomputed.
    pub fn has_mcast_changes(&self) -> bool {
        !self.state.mc_changed.is_empty()
    }

    /// Registered services.
    pub fn services(&self) -> usize {
        self.state.services.list.len()
    }

    /// Event subscriptions.
    pub fn subscriptions(&self) -> usize {
        self.state.informs.list.len()
    }

    /// Report(Notice) counters.
    pub fn report_stats(&self) -> ReportStats {
        self.reports.stats
    }

    /// Reports waiting for their ReportResp.
    pub fn reports_in_flight(&self) -> usize {
        self.reports.in_flight()
    }

    /// A trap the SM received (its Notice as the SMP carried it, without IssuerGID), to be
    /// forwarded to subscribers. A repeat of a trap (same issuer and TID) is not forwarded
    /// again.
    pub fn report_trap(&mut self, now: Instant, slid: Lid, tid: Tid, mut n: notice::Repr) {
        if self.recent_traps.contains(&(slid, tid.0)) {
            return;
        }
        if self.recent_traps.len() >= RECENT_TRAPS {
            self.recent_traps.pop_front();
        }
        self.recent_traps.push_back((slid, tid.0));
        let Some(db) = self.db.take() else {
            return;
        };
        let issuer = db
            .port_by_lid(n.issuer_lid)
            .or_else(|| db.port_by_lid(slid))
            .map(|p| Gid::new(db.p.subnet_prefix, db.port(p).guid));
        n.issuer_gid = Some(issuer.unwrap_or_default());
        self.forward(now, &n, &db);
        self.db = Some(db);
    }

    /// Reports the notices the state collected (66 / 67).
    fn flush(&mut self, now: Instant) {
        let pending = std::mem::take(&mut self.state.mc_notices);
        if pending.is_empty() {
            return;
        }
        let Some(db) = self.db.take() else {
            return;
        };
        for n in pending {
            let (trap, mgid) = match n {
                McNotice::Created(g) => (notice::trap::MCAST_GROUP_CREATED, g),
                McNotice::Deleted(g) => (notice::trap::MCAST_GROUP_DELETED, g),
            };
            if let Some(n) = sa_notice(&db, trap, mgid) {
                self.forward(now, &n, &db);
            }
        }
        self.db = Some(db);
    }

    /// Sends `n` to every subscription that selects it and may see it (`db`: the snapshot
    /// its ports are in).
    fn forward(&mut self, now: Instant, n: &notice::Repr, db: &Db) {
        let mut drop = Vec::new();
        let mut sends = Vec::new();
        for (i, s) in self.state.informs.list.iter().enumerate() {
            if !inform::selects(&s.rec.inform_info, n) {
                continue;
            }
            match inform::access(db, &self.state, s, n) {
                inform::Access::Send => sends.push(s.addr),
                inform::Access::Skip => {}
                inform::Access::Drop => drop.push(i),
            }
        }
        for i in drop.into_iter().rev() {
            self.state.informs.list.remove(i);
        }
        tracing::debug!(trap = ?n.trap_number(), subscribers = sends.len(), "notice");
        for to in sends {
            if let Some(mad) =
                self.reports
                    .send(now, to, n, self.cfg.report_timeout, self.cfg.report_retries)
            {
                self.out.push_back(Reply {
                    to,
                    mad: mad.to_vec(),
                    expects_response: true,
                });
            }
        }
    }

    /// SMInfo ActCount for SMInfoRecord.
    pub fn set_act_count(&mut self, n: u32) {
        if let Some(db) = &mut self.db {
            db.set_act_count(n);
        }
    }

    /// The other SMs of the subnet, for SMInfoRecord.
    pub fn set_remote_sms(&mut self, sms: Vec<(Lid, sm_mad::sm_info::Repr)>) {
        if let Some(db) = &mut self.db {
            db.set_remote_sms(sms);
        }
    }

    pub fn stats(&self) -> SaStats {
        self.stats
    }

    /// Requests received per attribute ID, since the server started.
    pub fn queries_by_attribute(&self) -> &BTreeMap<u16, u64> {
        &self.by_attribute
    }

    /// RMPP transfers in progress.
    pub fn transfers(&self) -> usize {
        self.transfers.len()
    }

    pub fn poll_transmit(&mut self) -> Option<Reply> {
        self.out.pop_front()
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        [
            self.deadlines.first().map(|d| d.0),
            self.reports.next_deadline(),
            self.state.services.next_expiry(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// A class-0x03 MAD from `from` (never panics, whatever the bytes).
    pub fn handle_mad(&mut self, now: Instant, from: Requester, m: &[u8]) {
        if m.len() < mad::LEN || mad::peek_class(m) != Some(MgmtClass::SubnAdm) {
            tracing::debug!(len = m.len(), slid = %from.lid, "SA: not an SA MAD; dropped");
            self.stats.dropped += 1;
            return;
        }
        let method = Method::from_raw_value(m[3]);
        let attr_id = u16::from_be_bytes([m[16], m[17]]);
        tracing::trace!(slid = %from.lid, qpn = from.qpn, tid = %Tid(tid_of(m)), ?method, attr = attr_id, len = m.len(), "SA MAD");
        if method.is_response() {
            // A ReportResp stops its Report's retransmission; nothing is answered.
            if method == Method::ReportResp && self.reports.ack(Tid(tid_of(m))) {
                tracing::trace!(slid = %from.lid, "ReportResp");
            }
            return;
        }
        if self.db.is_none() {
            tracing::debug!("SA query before the subnet is up; dropped (C15-0.1.3)");
            self.stats.dropped += 1;
            return;
        }
        let first =
            rmpp::Repr::parse_mad(m).map_or(true, |r| !r.is_active() || r.segment_number() <= 1);
        if first {
            *self.by_attribute.entry(attr_id).or_default() += 1;
        }
        if self.cfg.rmpp == RmppMode::Segment {
            if let Ok(r) = rmpp::Repr::parse_mad(m) {
                if r.is_active() {
                    return self.on_rmpp(now, from, m, &r);
                }
            }
        }
        if let Some(a) = self.serve(now, from, m) {
            self.deliver(now, from, (from.lid, tid_of(m)), a);
        }
    }

    /// RMPP traffic from a requester: control MADs for our senders, DATA of a request.
    fn on_rmpp(&mut self, now: Instant, from: Requester, m: &[u8], r: &rmpp::Repr) {
        let key = (from.lid, tid_of(m));
        match r.rmpp_type {
            RmppType::Ack | RmppType::Stop | RmppType::Abort => {
                let Some(t) = self.transfers.get_mut(&key) else {
                    tracing::trace!(tid = key.1, "RMPP control MAD for no transfer");
                    return;
                };
                if let Some(s) = &mut t.send {
                    if let Err(e) = s.handle_mad(now, m) {
                        tracing::debug!(tid = key.1, "RMPP from requester: {e}");
                    }
                } else if let Some(rx) = &mut t.recv {
                    if let Err(e) = rx.handle_mad(m) {
                        tracing::debug!(tid = key.1, "RMPP from requester: {e}");
                    }
                }
                self.pump(key);
            }
            RmppType::Data => {
                if !self.transfers.contains_key(&key) {
                    if self.transfers.len() >= self.cfg.max_transfers {
                        let a = error(m, sa::ERR_NO_RESOURCES);
                        self.deliver(now, from, key, a);
                        return;
                    }
                    self.transfers.insert(
                        key,
                        Transfer {
                            to: from,
                            recv: Some(RmppReceiver::sa()),
                            answered: false,
                            send: None,
                            deadline: None,
                            recv_deadline: now + self.cfg.receive_timeout,
                        },
                    );
                }
                let mut request = None;
                if let Some(rx) = self.transfers.get_mut(&key).and_then(|t| t.recv.as_mut()) {
                    if let Err(e) = rx.handle_mad(m) {
                        tracing::debug!(tid = key.1, "RMPP request segment: {e}");
                    }
                    if *rx.state() == ReceiverState::Complete {
                        if let (Some(h), Some(p)) = (rx.header(), rx.payload()) {
                            let mut whole = h.to_vec();
                            whole.extend_from_slice(p);
                            request = Some(whole);
                        }
                    }
                }
                self.pump(key);
                if let Some(req) = request {
                    let first = self
                        .transfers
                        .get_mut(&key)
                        .is_some_and(|t| !std::mem::replace(&mut t.answered, true));
                    if first {
                        if let Some(a) = self.serve(now, from, &req) {
                            self.deliver(now, from, key, a);
                        }
                    }
                }
            }
            _ => {
                // Not a type a requester sends: tell it (ABORT, bad RMPP type).
                let mut rx = RmppReceiver::sa();
                let _ = rx.handle_mad(m);
                while let Some(x) = rx.poll_transmit() {
                    self.out.push_back(Reply::answer(from, x.to_vec()));
                }
            }
        }
    }

    /// Drains a transfer's outgoing MADs, re-registers its deadline, removes it when done.
    fn pump(&mut self, key: Key) {
        let Some(t) = self.transfers.get_mut(&key) else {
            return;
        };
        if let Some(rx) = &mut t.recv {
            while let Some(x) = rx.poll_transmit() {
                self.out.push_back(Reply::answer(t.to, x.to_vec()));
            }
        }
        if let Some(s) = &mut t.send {
            while let Some(x) = s.poll_transmit() {
                self.out.push_back(Reply::answer(t.to, x.to_vec()));
            }
        }
        let recv_failed = t
            .recv
            .as_ref()
            .is_some_and(|r| matches!(r.state(), ReceiverState::Failed(_)));
        let send_state = t.send.as_ref().map(|s| s.state().clone());
        let finished = match &send_state {
            Some(SenderState::Done) => {
                self.stats.transfers_done += 1;
                true
            }
            Some(SenderState::Failed(e)) => {
                tracing::debug!(tid = key.1, "RMPP transfer failed: {e}");
                self.stats.transfers_failed += 1;
                true
            }
            Some(SenderState::Sending) => false,
            None => recv_failed,
        };
        let next = match &t.send {
            Some(s) => s.poll_timeout(),
            None => Some(t.recv_deadline),
        };
        if let Some(d) = t.deadline.take() {
            self.deadlines.remove(&(d, key));
        }
        if finished {
            self.transfers.remove(&key);
            return;
        }
        if let Some(d) = next {
            t.deadline = Some(d);
            self.deadlines.insert((d, key));
        }
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        for (to, mad) in self.reports.expire(now, self.cfg.report_timeout) {
            self.out.push_back(Reply {
                to,
                mad: mad.to_vec(),
                expects_response: true,
            });
        }
        self.state.services.expire(now);
        while let Some(&(d, key)) = self.deadlines.first() {
            if d > now {
                break;
            }
            self.deadlines.pop_first();
            let Some(t) = self.transfers.get_mut(&key) else {
                continue;
            };
            t.deadline = None;
            match &mut t.send {
                Some(s) => s.handle_timeout(now),
                None => {
                    if let Some(rx) = &mut t.recv {
                        rx.abort(rmpp::RmppStatus::TotalTimeTooLong);
                    }
                }
            }
            self.pump(key);
        }
    }

    /// Puts an answer on its way.
    fn deliver(&mut self, now: Instant, to: Requester, key: Key, a: Answer) {
        self.stats.queries += 1;
        match a {
            Answer::Single(b) => {
                let status = u16::from_be_bytes([b[4], b[5]]);
                if status != 0 {
                    self.stats.errors += 1;
                }
                tracing::trace!(tid = key.1, status, "SA answer");
                self.out.push_back(Reply::answer(to, b.to_vec()));
            }
            Answer::Table { header, payload } => {
                tracing::trace!(tid = key.1, bytes = payload.len(), "SA table answer");
                match self.cfg.rmpp {
                    RmppMode::Kernel => {
                        let mut h = *header;
                        // As OpenSM hands it to the kernel: only Active; the kernel fills in
                        // version, type, segment numbers and lengths.
                        h.rmpp = rmpp::Repr {
                            rmpp_flags: RmppFlags::ACTIVE,
                            ..rmpp::Repr::default()
                        };
                        let mut mad = vec![0u8; sa::HEADER_LEN];
                        if h.emit_header(&mut mad).is_ok() {
                            mad.extend_from_slice(&payload);
                            self.out.push_back(Reply::answer(to, mad));
                        }
                    }
                    RmppMode::Segment => self.send_table(now, to, key, &header, payload),
                }
            }
        }
    }

    fn send_table(
        &mut self,
        now: Instant,
        to: Requester,
        key: Key,
        h: &sa::Repr,
        payload: Vec<u8>,
    ) {
        let exists = self.transfers.get(&key).is_some_and(|t| t.send.is_some());
        if exists {
            tracing::debug!(
                tid = key.1,
                "duplicate request while its answer is in transfer"
            );
            return;
        }
        if !self.transfers.contains_key(&key) && self.transfers.len() >= self.cfg.max_transfers {
            let mut b = [0u8; 256];
            let mut e = h.response(sa::ERR_NO_RESOURCES);
            e.method = h.method;
            e.attribute_offset = 0;
            if e.emit(&mut b).is_ok() {
                self.stats.errors += 1;
                self.out.push_back(Reply::answer(to, b.to_vec()));
            }
            return;
        }
        let seg = match Segmenter::sa(h, payload) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("cannot segment an SA answer: {e}");
                return;
            }
        };
        let cfg = SenderConfig {
            ack_timeout: self.cfg.ack_timeout,
            max_retries: self.cfg.max_retries,
            initial_window: 1,
        };
        let sender = RmppSender::new(seg, cfg, now);
        let t = self.transfers.entry(key).or_insert(Transfer {
            to,
            recv: None,
            answered: true,
            send: None,
            deadline: None,
            recv_deadline: now,
        });
        t.send = Some(sender);
        self.pump(key);
    }

    /// The answer to one request (a whole MAD: 256 bytes, or longer when reassembled), or
    /// `None` when it is to be dropped. Pure: the same request gives the same answer; a Set
    /// or Delete is answered as it would be, on a copy of the SA's state.
    pub fn query(&self, now: Instant, from: Requester, req: &[u8]) -> Option<Answer> {
        let db = self.db.as_ref()?;
        let mut copy;
        let st = if is_set(req) {
            copy = self.state.clone();
            StateRef::Mut(&mut copy)
        } else {
            StateRef::Shared(&self.state)
        };
        answer(&self.cfg, db, st, now, from, req)
    }

    /// Answers a request, applying what a Set or Delete changes, and reports the notices
    /// the change raised.
    fn serve(&mut self, now: Instant, from: Requester, req: &[u8]) -> Option<Answer> {
        let db = self.db.as_ref()?;
        let a = answer(
            &self.cfg,
            db,
            StateRef::Mut(&mut self.state),
            now,
            from,
            req,
        );
        self.flush(now);
        a
    }
}

/// Whether a MAD's method is one that changes the SA's state.
fn is_set(req: &[u8]) -> bool {
    req.get(3)
        .is_some_and(|&m| matches!(Method::from_raw_value(m), Method::Set | Method::Delete))
}

/// The answer to `req` (see [`Server::query`]); a Set or Delete changes `st` when it is
/// [`StateRef::Mut`].
fn answer(
    cfg: &SaConfig,
    db: &Db,
    mut st: StateRef<'_>,
    now: Instant,
    from: Requester,
    req: &[u8],
) -> Option<Answer> {
    if req.len() < mad::LEN {
        return None;
    }
    let mut head = [0u8; 256];
    let n = req.len().min(256);
    head[..n].copy_from_slice(&req[..n]);
    let method = mad::field::METHOD.get(&head);
    if mad::field::BASE_VERSION.get(&head) != mad::BASE_VERSION
        || mad::field::CLASS_VERSION.get(&head) != sa::CLASS_VERSION
    {
        return Some(error(&head, MadStatus::BAD_VERSION));
    }
    if !matches!(
        method,
        Method::Get
            | Method::Set
            | Method::GetTable
            | Method::GetTraceTable
            | Method::GetMulti
            | Method::Delete
    ) {
        return Some(error(&head, MadStatus::METHOD_UNSUPPORTED));
    }
    // A reassembled RMPP request holds only its payload; any other MAD is 256 bytes.
    let reassembled =
        req.len() >= sa::HEADER_LEN && rmpp::Repr::parse_mad(req).is_ok_and(|r| r.is_active());
    if req.len() < sa::LEN && !reassembled {
        return Some(error(&head, sa::ERR_REQ_INVALID));
    }
    let Ok(h) = sa::Repr::parse(&head) else {
        return Some(error(&head, sa::ERR_REQ_INVALID));
    };
    if h.sm_key != 0 && h.sm_key != cfg.sa_key {
        tracing::debug!(slid = %from.lid, "SA query with a wrong SM_Key; discarded (C15-0.1.5)");
        return None;
    }
    if h.attr_id == attr::CLASS_PORT_INFO {
        if method != Method::Get {
            return Some(error(&head, MadStatus::METHOD_ATTR_UNSUPPORTED));
        }
        let cpi = records::class_port_info(db.p.qos, true, cfg.mcast_top, cfg.resp_time_value);
        let mut r = h.response(MadStatus::OK);
        r.attribute_offset = h.attribute_offset;
        let mut b = Box::new([0u8; 256]);
        if r.emit(&mut b[..]).is_err() || cpi.emit(&mut b[sa::HEADER_LEN..]).is_err() {
            return Some(error(&head, sa::ERR_REQ_INVALID));
        }
        return Some(Answer::Single(b));
    }
    let Some(hd) = records::handler(h.attr_id) else {
        return Some(error(&head, MadStatus::METHOD_ATTR_UNSUPPORTED));
    };
    if !hd.methods.contains(&method) {
        return Some(error(&head, MadStatus::METHOD_ATTR_UNSUPPORTED));
    }
    let rec_offset = sa::attribute_offset_for(hd.len).unwrap_or(0);
    if method != Method::GetMulti && h.attribute_offset != 0 && h.attribute_offset != rec_offset {
        return Some(error(&head, sa::ERR_REQ_INVALID));
    }
    if let Some(l) = hd.layout {
        if mask::layout(l).unknown_bits(h.component_mask) != 0 {
            return Some(error(&head, sa::ERR_REQ_INVALID));
        }
    }
    if method == Method::GetMulti && !h.rmpp.is_active() {
        // GetMulti requests travel by RMPP (OpenSM: ERR_REQ_INVALID otherwise).
        return Some(error(&head, sa::ERR_REQ_INVALID));
    }
    let Some(req_port) = db.port_by_lid(from.lid) else {
        return Some(error(&head, sa::ERR_REQ_INVALID));
    };
    let mut tmpl = [0u8; 256];
    let data = req.get(sa::HEADER_LEN..).unwrap_or(&[]);
    let k = data.len().min(tmpl.len());
    tmpl[..k].copy_from_slice(&data[..k]);
    let q = Query {
        method,
        mask: h.component_mask,
        rec: &tmpl,
        attr_mod: h.attr_mod,
        trusted: h.sm_key != 0,
        req: req_port,
        from,
        now,
    };
    let limit = if method == Method::Get {
        2
    } else {
        cfg.max_payload / hd.len.div_ceil(8).max(1) / 8
    };
    let mut out = Out::new(hd.len, limit.max(1));
    let done = match (method, hd.set, &mut st) {
        (Method::Set | Method::Delete, Some(set), StateRef::Mut(s)) => set(db, s, &q, &mut out),
        (Method::Set | Method::Delete, _, _) => Err(MadStatus::METHOD_ATTR_UNSUPPORTED),
        (_, _, _) => match hd.run {
            Run::Db(f) => f(db, &q, &mut out),
            Run::State(f) => f(db, st.get(), &q, &mut out),
            Run::None => Err(MadStatus::METHOD_ATTR_UNSUPPORTED),
        },
    };
    if let Err(status) = done {
        return Some(error(&head, status));
    }
    if matches!(method, Method::Get | Method::Set | Method::Delete) {
        return Some(match out.count {
            0 => error(&head, sa::ERR_NO_RECORDS),
            1 => {
                let mut r = h.response(MadStatus::OK);
                r.attribute_offset = rec_offset;
                let mut b = Box::new([0u8; 256]);
                let n = out.len.min(sa::DATA_LEN);
                r.data.0[..n].copy_from_slice(&out.data[..n]);
                if r.emit(&mut b[..]).is_err() {
                    return Some(error(&head, sa::ERR_REQ_INVALID));
                }
                Answer::Single(b)
            }
            _ => error(&head, sa::ERR_TOO_MANY_RECORDS),
        });
    }
    let mut r = h.response(MadStatus::OK);
    if h.attr_id == sm_mad::multipath_record::ATTR_ID {
        r.attr_id = sm_mad::path_record::ATTR_ID;
    }
    r.attribute_offset = if out.count == 0 { 0 } else { rec_offset };
    Some(Answer::Table {
        header: Box::new(r),
        payload: out.data,
    })
}

/// A notice the SA raises itself (traps 64-67, about `gid`), issued by the SM's port.
fn sa_notice(db: &Db, trap: u16, gid: Gid) -> Option<notice::Repr> {
    let d = notice::details_64_67::Repr { gid_addr: gid };
    let t = match trap {
        notice::trap::GID_IN_SERVICE => notice::Trap::GidInService(d),
        notice::trap::GID_OUT_OF_SERVICE => notice::Trap::GidOutOfService(d),
        notice::trap::MCAST_GROUP_CREATED => notice::Trap::McastGroupCreated(d),
        notice::trap::MCAST_GROUP_DELETED => notice::Trap::McastGroupDeleted(d),
        _ => return None,
    };
    let mut n = notice::Repr::generic(notice::ProducerType::ClassManager, db.p.sm_lid, t);
    n.issuer_gid = Some(Gid::new(db.p.subnet_prefix, db.p.sm_port_guid));
    Some(n)
}

/// An error answer to `req` (its first 256 bytes): the request echoed with `status`.
fn error(req: &[u8], status: MadStatus) -> Answer {
    let mut b = Box::new([0u8; 256]);
    let n = req.len().min(256);
    b[..n].copy_from_slice(&req[..n]);
    let method = Method::from_raw_value(b[3]);
    let resp = match method {
        Method::Set => Method::GetResp,
        m => Method::from_raw_value(m.to_raw_value() | 0x80),
    };
    b[3] = resp.to_raw_value();
    b[4..6].copy_from_slice(&status.0.to_be_bytes());
    // No RMPP, SM_Key 0.
    b[rmpp::OFFSET..rmpp::HEADER_END].fill(0);
    b[36..44].fill(0);
    if method == Method::GetTable {
        b[44..46].fill(0);
    }
    if u16::from_be_bytes([b[16], b[17]]) == sm_mad::multipath_record::ATTR_ID {
        b[16..18].copy_from_slice(&sm_mad::path_record::ATTR_ID.to_be_bytes());
    }
    Answer::Single(b)
}

#[cfg(test)]
mod tests;
