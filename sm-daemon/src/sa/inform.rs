//! Event subscriptions (InformInfo, IBA 13.4.8.3 and 15.2.5.12) and Report(Notice)
//! forwarding, as OpenSM 3.3.23 does them (`osm_sa_informinfo.c`, `osm_inform.c`, read for
//! the facts).
//!
//! # Subscribing
//! `Set(InformInfo)` with Subscribe 1 adds a subscription, or replaces one with the same
//! report address (the requester's LID, QP, SL, P_Key index), the same GID (or LID range when
//! the GID is zero), Type, IsGeneric, TrapNumber / DeviceID, QPN and RespTimeValue, and
//! ProducerType / VendorID. The stored QPN is the requester's source QP. Subscribe 0 removes
//! that subscription (none: ERR_REQ_INVALID). The answer echoes the request; an error answer
//! has Subscribe cleared (o13-13.1.1). Refused with ERR_REQ_INVALID: Subscribe above 1, a
//! security trap (256-259) without the SM_Key, a GID of no known port or of a port sharing no
//! partition with the requester, a LID range beyond the subnet's LIDs or holding such a port
//! (o13-14.1.1; LIDRangeBegin 0xFFFF means every LID and is not checked).
//!
//! # Listing
//! `Get` / `GetTable(InformInfoRecord)` match SubscriberGID and Enum (always 0), the only
//! components OpenSM compares; a requester sees the subscriptions of ports it shares a
//! partition with; the QPN is zero unless it gave the SM_Key.
//!
//! # Forwarding
//! A notice (a trap the SM received, with the issuer's GID filled in, or one the SA raises:
//! 64 / 65 GID in / out of service, 66 / 67 multicast group created / deleted) goes to every
//! subscription that matches it:
//! - a non-zero GID must equal the notice's IssuerGID; else, unless LIDRangeBegin is 0xFFFF,
//!   the IssuerLID must lie in LIDRangeBegin..=LIDRangeEnd;
//! - IsGeneric must agree; Type, TrapNumber / DeviceID must match unless 0xFFFF,
//!   ProducerType / VendorID unless 0xFFFFFF;
//! - access (o13-17.1.1): for traps 66 / 67 the subscriber's P_Key table must hold the
//!   group's partition; for 64 / 65 the port in the notice's details, for other traps the
//!   issuer's port, must share a partition with the subscriber (when it does not and the
//!   subscription names a LID range, the subscription is dropped, o13-17.1.2).
//!
//! Each Report(Notice) (SA class, method Report, attribute Notice with all 80 bytes,
//! IssuerGID included) goes to the subscriber's report address and is sent again, with a new
//! TID, until a ReportResp with its TID comes back, at most `report_retries` times, every
//! `report_timeout`. A ReportResp gets no answer.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use sm_core::fabric::PortIdx;

use sm_core::mcast::{has_pkey, share_pkey};
use sm_mad::inform_info::{self, ALL_LIDS, ALL_TRAPS};
use sm_mad::notice::{self, Kind};
use sm_mad::{Gid, Method, Tid, attr, inform_info_record as iir, mad, sa};

use super::db::Db;
use super::records::{HResult, Out, Query};
use super::{Requester, State};

use crate::core::time::Instant;

/// ProducerType / VendorID value meaning "every producer".
const ALL_PRODUCERS: u32 = 0xFF_FFFF;
/// TrapNumber / DeviceID / Type value meaning "every one".
const ALL16: u16 = 0xFFFF;

/// One subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Subscription {
    /// SubscriberGID (from the requester's port), Enum 0, the InformInfo as stored.
    pub(crate) rec: iir::Repr,
    /// Where Reports go: the address the Set came from.
    pub(crate) addr: Requester,
}

/// Every subscription, newest first (OpenSM inserts at the head).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Informs {
    pub(crate) list: Vec<Subscription>,
}

impl Informs {
    /// Drops the subscriptions of a port; returns how many.
    pub(crate) fn drop_port(&mut self, guid: sm_mad::Guid) -> usize {
        let before = self.list.len();
        self.list.retain(|s| s.rec.subscriber_gid.guid() != guid);
        before - self.list.len()
    }
}

/// OpenSM's `match_inf_rec`: the same subscription.
fn same(a: &Subscription, b: &Subscription) -> bool {
    let (x, y) = (&a.rec.inform_info, &b.rec.inform_info);
    let place = if y.gid != Gid::default() {
        x.gid == y.gid
    } else {
        x.lid_range_begin == y.lid_range_begin && x.lid_range_end == y.lid_range_end
    };
    a.addr == b.addr
        && place
        && x.r#type == y.r#type
        && x.is_generic == y.is_generic
        && x.trap_number == y.trap_number
        && x.qpn == y.qpn
        && x.resp_time_value == y.resp_time_value
        && x.producer_type == y.producer_type
}

/// o13-14.1.1: the requester and the ports the subscription is about can reach each other.
fn access_ok(db: &Db, req: PortIdx, ii: &inform_info::Repr) -> bool {
    if ii.gid != Gid::default() {
        return db
            .port_by_guid(ii.gid.guid())
            .is_some_and(|p| db.share_pkey(p, req));
    }
    let begin = ii.lid_range_begin.0;
    if begin == ALL_LIDS.0 {
        return true;
    }
    let size = db.lid_span();
    let mut end = ii.lid_range_end.0 as usize;
    if end == 0 {
        end = begin as usize;
    } else if end >= size {
        end = size.saturating_sub(1);
    }
    if begin as usize >= size {
        return false;
    }
    (begin as usize..=end).all(|l| {
        db.port_by_lid(sm_mad::Lid(l as u16))
            .is_none_or(|p| db.share_pkey(p, req))
    })
}

/// Set(InformInfo): subscribe or unsubscribe.
pub(crate) fn inform_info_set(db: &Db, st: &mut State, q: &Query<'_>, out: &mut Out) -> HResult {
    let mut ii = inform_info::Repr::parse(q.rec).map_err(|_| sa::ERR_REQ_INVALID)?;
    // Subscribe is a whole byte of which only 0 and 1 are defined.
    if q.rec.get(23).is_some_and(|&b| b > 1) {
        return Err(sa::ERR_REQ_INVALID);
    }
    let security = notice::trap::BAD_M_KEY..=notice::trap::BAD_SWITCH_P_KEY;
    if !q.trusted && ii.is_generic && security.contains(&ii.trap_number) {
        tracing::debug!("subscription to a security trap without the SM_Key");
        return Err(sa::ERR_REQ_INVALID);
    }
    let subscriber = Gid::new(db.p.subnet_prefix, db.port(q.req).guid);
    if ii.subscribe {
        ii.qpn = q.from.qpn & 0xFF_FFFF;
    }
    let sub = Subscription {
        rec: iir::Repr {
            subscriber_gid: subscriber,
            r#enum: 0,
            inform_info: ii,
        },
        addr: q.from,
    };
    let found = st.informs.list.iter().position(|s| same(s, &sub));
    if ii.subscribe {
        if !access_ok(db, q.req, &ii) {
            tracing::debug!(%subscriber, "subscription refused: no access to its source");
            return Err(sa::ERR_REQ_INVALID);
        }
        match found {
            Some(i) => st.informs.list[i] = sub,
            None if st.informs.list.len() >= st.max_entries => {
                tracing::warn!(%subscriber, limit = st.max_entries, "event subscription refused: too many");
                return Err(sa::ERR_NO_RESOURCES);
            }
            None => st.informs.list.insert(0, sub),
        }
        tracing::debug!(%subscriber, trap = ii.trap_number, "event subscription added");
    } else {
        let Some(i) = found else {
            tracing::debug!(%subscriber, "unsubscribe from no subscription");
            return Err(sa::ERR_REQ_INVALID);
        };
        st.informs.list.remove(i);
        tracing::debug!(%subscriber, trap = ii.trap_number, "event subscription removed");
    }
    // The answer is the request as it came.
    out.push(&q.rec[..inform_info::LEN]);
    Ok(())
}

/// Get / GetTable(InformInfoRecord).
pub(crate) fn inform_info_records(db: &Db, st: &State, q: &Query<'_>, out: &mut Out) -> HResult {
    let t = iir::Repr::parse(q.rec).map_err(|_| sa::ERR_REQ_INVALID)?;
    for s in &st.informs.list {
        if !out.open() {
            break;
        }
        if (q.mask & iir::comp::SUBSCRIBER_GID != 0 && s.rec.subscriber_gid != t.subscriber_gid)
            || (q.mask & iir::comp::ENUM != 0 && s.rec.r#enum != t.r#enum)
        {
            continue;
        }
        let Some(p) = db.port_by_guid(s.rec.subscriber_gid.guid()) else {
            continue;
        };
        if !db.share_pkey(q.req, p) {
            continue;
        }
        let mut r = s.rec;
        if !q.trusted {
            r.inform_info.qpn = 0;
        }
        out.push_wire(&r);
    }
    Ok(())
}

/// The fields of a subscription that select notices match this one.
pub(crate) fn selects(ii: &inform_info::Repr, n: &notice::Repr) -> bool {
    let issuer_gid = n.issuer_gid.unwrap_or_default();
    if ii.gid != Gid::default() {
        if ii.gid != issuer_gid {
            return false;
        }
    } else if ii.lid_range_begin != ALL_LIDS
        && !(ii.lid_range_begin.0 <= n.issuer_lid.0 && n.issuer_lid.0 <= ii.lid_range_end.0)
    {
        return false;
    }
    if ii.is_generic != n.is_generic() {
        return false;
    }
    if ii.r#type.to_raw_value() != ALL16
        && ii.r#type.to_raw_value() != u16::from(n.notice_type.to_raw_value())
    {
        return false;
    }
    match n.kind {
        Kind::Generic {
            producer_type,
            trap,
        } => {
            (ii.trap_number == ALL_TRAPS || ii.trap_number == trap.number())
                && (ii.producer_type == ALL_PRODUCERS
                    || ii.producer_type == producer_type.to_raw_value())
        }
        Kind::Vendor {
            vendor_id,
            device_id,
            ..
        } => {
            (ii.trap_number == ALL16 || ii.trap_number == device_id)
                && (ii.producer_type == ALL_PRODUCERS || ii.producer_type == vendor_id)
        }
    }
}

/// What the access check of one subscription says about a notice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    Send,
    Skip,
    /// No access, and the subscription names a LID range: drop it (o13-17.1.2).
    Drop,
}

/// o13-17.1.1: may the subscriber see the notice? `db` is the snapshot the notice's ports
/// are in (the previous one for trap 65).
pub(crate) fn access(db: &Db, st: &State, s: &Subscription, n: &notice::Repr) -> Access {
    let Some(dest) = db.port_by_lid(s.addr.lid) else {
        return Access::Skip;
    };
    let details_gid = match n.trap() {
        Some(
            notice::Trap::GidInService(d)
            | notice::Trap::GidOutOfService(d)
            | notice::Trap::McastGroupCreated(d)
            | notice::Trap::McastGroupDeleted(d),
        ) => Some(d.gid_addr),
        _ => None,
    };
    let trap = n.trap_number().unwrap_or(0);
    if trap == notice::trap::MCAST_GROUP_CREATED || trap == notice::trap::MCAST_GROUP_DELETED {
        let Some(g) = details_gid.and_then(|m| st.mc.get(&m)) else {
            return Access::Skip;
        };
        let keys = db.pkey_table(dest).map_or(&[][..], |t| &t.by_index[..]);
        return if keys.is_empty() || has_pkey(keys, g.p_key) {
            Access::Send
        } else {
            Access::Skip
        };
    }
    let source = details_gid.or(n.issuer_gid).unwrap_or_default();
    let Some(src) = db.port_by_guid(source.guid()) else {
        return Access::Skip;
    };
    let keys = |p: PortIdx| db.pkey_table(p).map_or(&[][..], |t| &t.by_index[..]);
    if share_pkey(keys(src), keys(dest)) {
        Access::Send
    } else if s.rec.inform_info.lid_range_begin != ALL_LIDS {
        Access::Drop
    } else {
        Access::Skip
    }
}

/// A Report on its way.
#[derive(Debug, Clone)]
struct Pending {
    to: Requester,
    mad: [u8; 256],
    deadline: Instant,
    tries_left: u32,
}

/// Reports waiting for their ReportResp, by the low 32 bits of the TID.
#[derive(Debug, Clone, Default)]
pub(crate) struct Reports {
    next_tid: u32,
    pending: HashMap<u32, Pending>,
    deadlines: BTreeSet<(Instant, u32)>,
    /// Reports sent, resent, acknowledged, given up.
    pub(crate) stats: ReportStats,
}

/// Report counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ReportStats {
    pub sent: u64,
    pub resent: u64,
    pub acked: u64,
    pub lost: u64,
}

/// What a Report transmission needs: where to, and the MAD.
pub(crate) type Outgoing = (Requester, [u8; 256]);

impl Reports {
    fn tid(&mut self) -> u32 {
        // OpenSM's forwarded-trap TIDs start at 0x02DAB000; ours count from 0x0AB0_0000.
        self.next_tid = self.next_tid.wrapping_add(1).max(0x0AB0_0000);
        self.next_tid
    }

    /// A Report(Notice) for `to`, queued with its deadline; returns the MAD to send.
    pub(crate) fn send(
        &mut self,
        now: Instant,
        to: Requester,
        n: &notice::Repr,
        timeout: Duration,
        retries: u32,
    ) -> Option<[u8; 256]> {
        let tid = self.tid();
        let mut r = sa::Repr::request(Method::Report, Tid(u64::from(tid)), attr::NOTICE, 0);
        n.emit(&mut r.data.0).ok()?;
        let mad = r.to_bytes().ok()?;
        let deadline = now + timeout;
        self.pending.insert(
            tid,
            Pending {
                to,
                mad,
                deadline,
                tries_left: retries,
            },
        );
        self.deadlines.insert((deadline, tid));
        self.stats.sent += 1;
        Some(mad)
    }

    /// A ReportResp: stops the retransmission of its Report. False when none matched.
    pub(crate) fn ack(&mut self, tid: Tid) -> bool {
        match self.pending.remove(&tid.low32()) {
            Some(p) => {
                self.deadlines.remove(&(p.deadline, tid.low32()));
                self.stats.acked += 1;
                true
            }
            None => false,
        }
    }

    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.first().map(|d| d.0)
    }

    /// Reports in flight.
    pub(crate) fn in_flight(&self) -> usize {
        self.pending.len()
    }

    /// Resends (with a new TID) or gives up every Report whose deadline passed.
    pub(crate) fn expire(&mut self, now: Instant, timeout: Duration) -> Vec<Outgoing> {
        let mut out = Vec::new();
        while let Some(&(d, tid)) = self.deadlines.first() {
            if d > now {
                break;
            }
            self.deadlines.pop_first();
            let Some(mut p) = self.pending.remove(&tid) else {
                continue;
            };
            if p.tries_left == 0 {
                self.stats.lost += 1;
                tracing::debug!(to = %p.to.lid, "Report not acknowledged; given up");
                continue;
            }
            p.tries_left -= 1;
            let new = self.tid();
            mad::field::TID.set(&mut p.mad, Tid(u64::from(new)));
            p.deadline = now + timeout;
            self.deadlines.insert((p.deadline, new));
            self.stats.resent += 1;
            out.push((p.to, p.mad));
            self.pending.insert(new, p);
        }
        out
    }
}
