//! ServiceRecord (IBA 15.2.5.14): services registered with the SA, as OpenSM 3.3.23 keeps
//! them (`osm_sa_service_record.c`, `osm_service.c`, read for the facts).
//!
//! - A service is identified by its RID: ServiceID, ServiceGID and ServiceP_Key together.
//!   `Set` registers it or, when the RID exists, replaces the record and restarts the
//!   lease; `Delete` removes the record with the RID of the request (whatever the component
//!   mask names) or answers ERR_NO_RECORDS; both answer with the record.
//! - `Set` needs ServiceID and ServiceGID in the component mask (else ERR_REQ_INVALID). When
//!   the mask names ServiceP_Key, the requester's P_Key table must hold it, and so must the
//!   port of a unicast ServiceGID, which must exist (else ERR_REQ_INVALID, for `Delete` too).
//!   Without ServiceLease in the mask the lease is infinite; without ServiceP_Key the answer
//!   shows the default P_Key 0xFFFF (the stored record keeps what was sent).
//! - The lease counts in seconds from the last `Set`, on the core's clock; 0xFFFFFFFF never
//!   expires. An expired service is removed ([`Services::expire`]).
//! - `Get` / `GetTable` match every component the mask names, and show a requester only the
//!   services whose P_Key (when valid) its table holds.
//! - ServiceKey: zero in every answer to a requester without the SM_Key (p. 923).
//! - A service belongs to the port that registered it: a `Set` replacing it or a `Delete`
//!   from another port is refused with ERR_REQ_DENIED, unless the requester holds the
//!   SM_Key (OpenSM lets any port do either).

use sm_core::mcast::has_pkey;
use sm_mad::service_record::{self as svc, Lease, comp};
use sm_mad::{Bytes, Method, PKey, sa};

use super::State;
use super::db::Db;
use super::mask::{Rec, layout};
use super::records::{HResult, Out, Query};
use std::time::Duration;

use crate::core::time::Instant;

/// One registered service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Service {
    pub(crate) rec: svc::Repr,
    /// The port GUID that registered it: only that port (or a requester holding the SM_Key)
    /// may replace or delete it.
    pub(crate) owner: sm_mad::Guid,
    /// When the lease runs out (`None`: infinite).
    pub(crate) expires: Option<Instant>,
}

/// The registered services, in registration order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Services {
    pub(crate) list: Vec<Service>,
}

/// The RID: ServiceID, ServiceGID, ServiceP_Key.
fn same_rid(a: &svc::Repr, b: &svc::Repr) -> bool {
    a.service_id == b.service_id
        && a.service_gid == b.service_gid
        && a.service_p_key == b.service_p_key
}

fn lease_end(now: Instant, lease: Lease) -> Option<Instant> {
    (!lease.is_infinite()).then(|| now + Duration::from_secs(u64::from(lease.0)))
}

impl Services {
    /// The earliest lease end.
    pub(crate) fn next_expiry(&self) -> Option<Instant> {
        self.list.iter().filter_map(|s| s.expires).min()
    }

    /// Removes the services whose lease ended by `now`; returns how many.
    pub(crate) fn expire(&mut self, now: Instant) -> usize {
        let before = self.list.len();
        self.list.retain(|s| {
            let keep = s.expires.is_none_or(|t| t > now);
            if !keep {
                tracing::debug!(service_id = %s.rec.service_id, name = %s.rec.service_name.as_string(), "service lease expired");
            }
            keep
        });
        before - self.list.len()
    }
}

/// The P_Key table of end port `p` holds `key` (no table known: holds everything).
fn port_has(db: &Db, p: sm_core::fabric::PortIdx, key: PKey) -> bool {
    db.pkey_table(p).is_none_or(|t| has_pkey(&t.by_index, key))
}

/// OpenSM's `validate_sr` for Set and Delete.
fn validate(db: &Db, q: &Query<'_>, r: &svc::Repr) -> HResult {
    if q.mask & comp::SERVICE_P_KEY == 0 {
        return Ok(());
    }
    if !port_has(db, q.req, r.service_p_key) {
        return Err(sa::ERR_REQ_INVALID);
    }
    if q.mask & comp::SERVICE_GID != 0 && r.service_gid.0[0] != 0xff {
        let Some(p) = db.port_by_guid(r.service_gid.guid()) else {
            return Err(sa::ERR_REQ_INVALID);
        };
        if !port_has(db, p, r.service_p_key) {
            return Err(sa::ERR_REQ_INVALID);
        }
    }
    Ok(())
}

/// The record as a requester sees it.
fn shown(mut r: svc::Repr, q: &Query<'_>) -> svc::Repr {
    if !q.trusted {
        r.service_key = Bytes([0; 16]);
    }
    r
}

/// Get / GetTable(ServiceRecord).
pub(crate) fn service_records(db: &Db, st: &State, q: &Query<'_>, out: &mut Out) -> HResult {
    let l = layout(Rec::Service);
    let mut buf = [0u8; svc::LEN];
    for s in &st.services.list {
        if !out.open() {
            break;
        }
        let key = s.rec.service_p_key;
        if !key.is_invalid() && !port_has(db, q.req, key) {
            continue;
        }
        if s.rec.emit(&mut buf).is_err() || !l.matches(q.rec, &buf, q.mask, 0) {
            continue;
        }
        out.push_wire(&shown(s.rec, q));
    }
    Ok(())
}

/// Set (register) / Delete (deregister) of a ServiceRecord.
pub(crate) fn service_set(db: &Db, st: &mut State, q: &Query<'_>, out: &mut Out) -> HResult {
    let mut r = svc::Repr::parse(q.rec).map_err(|_| sa::ERR_REQ_INVALID)?;
    validate(db, q, &r)?;
    let list = &mut st.services.list;
    let me = db.port(q.req).guid;
    let foreign = |s: &Service| s.owner != me && !q.trusted;
    if q.method == Method::Delete {
        let Some(i) = list.iter().position(|s| same_rid(&s.rec, &r)) else {
            return Err(sa::ERR_NO_RECORDS);
        };
        if foreign(&list[i]) {
            tracing::warn!(owner = %list[i].owner, by = %me, "ServiceRecord delete by another port refused");
            return Err(sa::ERR_REQ_DENIED);
        }
        let gone = list.remove(i);
        tracing::debug!(service_id = %gone.rec.service_id, name = %gone.rec.service_name.as_string(), "service deleted");
        out.push_wire(&shown(gone.rec, q));
        return Ok(());
    }
    if q.mask & (comp::SERVICE_ID | comp::SERVICE_GID) != comp::SERVICE_ID | comp::SERVICE_GID {
        return Err(sa::ERR_REQ_INVALID);
    }
    if q.mask & comp::SERVICE_LEASE == 0 {
        r.service_lease = Lease::INFINITE;
    }
    let entry = Service {
        rec: r,
        owner: me,
        expires: lease_end(q.now, r.service_lease),
    };
    let full = list.len() >= st.max_entries;
    match list.iter_mut().find(|s| same_rid(&s.rec, &r)) {
        Some(s) if foreign(s) => {
            tracing::warn!(owner = %s.owner, by = %me, "ServiceRecord replacement by another port refused");
            return Err(sa::ERR_REQ_DENIED);
        }
        Some(s) => *s = entry,
        None if full => {
            tracing::warn!(
                limit = st.max_entries,
                "service registration refused: too many"
            );
            return Err(sa::ERR_NO_RESOURCES);
        }
        None => list.push(entry),
    }
    tracing::debug!(service_id = %r.service_id, name = %r.service_name.as_string(), lease = r.service_lease.0, "service registered");
    if q.mask & comp::SERVICE_P_KEY == 0 {
        r.service_p_key = PKey(0xFFFF);
    }
    out.push_wire(&shown(r, q));
    Ok(())
}
