//! MCMemberRecord (IBA 15.2.5.17) and multicast PathRecords: the SA's side of the multicast
//! groups kept by [`McRegistry`] (`sm_core::mcast`, where the join / leave / query rules
//! live).
//!
//! - `Set` joins (and creates), `Delete` leaves, `Get` / `GetTable` query; the requester is
//!   the port that owns the MAD's source LID. Refusals are answered with
//!   [`McError::sa_status`](sm_core::mcast::McError::sa_status).
//! - A join or leave that changes a group's spanning tree, or deletes a group, marks its MLID
//!   for the core, which recomputes the tree and programs the switches' MFTs; traps 66 / 67
//!   the registry raises are reported to subscribers.
//! - A PathRecord whose DGID is a multicast GID names a group (OpenSM's
//!   `pr_process_multicast`): one record with the group's MLID, P_Key, MTU, rate, packet
//!   lifetime, SL, flow label, TClass and hop limit (0xFF beyond link-local scope), when the
//!   query's DLID, P_Key, SL, flow label, hop limit and TClass match the group and its SGID
//!   or SLID (when given) is a member.

use sm_core::mcast::{McRequest, PortCaps, PortDirectory};
use sm_mad::link::{Mtu, Rate};
use sm_mad::mcmember_record::{self as mcr, Scope};
use sm_mad::path_record::{self, Selector, comp as pcomp};
use sm_mad::{Gid, Guid, Method, sa};

use super::State;
use super::db::Db;
use super::records::{HResult, Out, Query};

impl PortDirectory for Db {
    /// A port the SM brought up: MTUCap and the rate of its link, as OpenSM checks a
    /// member's capabilities, and its P_Key table (none known: shares everything).
    fn port(&self, guid: Guid) -> Option<PortCaps<'_>> {
        let p = self.port_by_guid(guid)?;
        let e = Db::port(self, p);
        Some(PortCaps {
            mtu: Mtu::from_raw_value(e.mtu_cap),
            rate: Rate::from_raw_value(e.rate),
            pkeys: self.pkey_table(p).map_or(&[][..], |t| &t.by_index[..]),
        })
    }
}

/// The port GUID of the requester.
fn requester(db: &Db, q: &Query<'_>) -> Guid {
    db.port(q.req).guid
}

/// Get / GetTable(MCMemberRecord).
pub(crate) fn mcmember_records(db: &Db, st: &State, q: &Query<'_>, out: &mut Out) -> HResult {
    let rec = mcr::Repr::parse(q.rec).map_err(|_| sa::ERR_REQ_INVALID)?;
    let pkeys = db.pkey_table(q.req).map_or(&[][..], |t| &t.by_index[..]);
    for r in st.mc.query(&rec, q.mask, pkeys, q.trusted) {
        if !out.open() {
            break;
        }
        out.push_wire(&r);
    }
    Ok(())
}

/// Set (join) / Delete (leave) of an MCMemberRecord.
pub(crate) fn mcmember_set(db: &Db, st: &mut State, q: &Query<'_>, out: &mut Out) -> HResult {
    let record = mcr::Repr::parse(q.rec).map_err(|_| sa::ERR_REQ_INVALID)?;
    let req = McRequest {
        record,
        comp_mask: q.mask,
        requester: requester(db, q),
    };
    let answer = if q.method == Method::Delete {
        let o = st.mc.leave(db, &req).map_err(|e| {
            tracing::debug!(port = %req.record.port_gid, mgid = %req.record.mgid, "leave refused: {e}");
            e.sa_status().to_mad_status()
        })?;
        tracing::debug!(mgid = %o.mgid, mlid = %o.mlid, port = %req.record.port_gid, deleted = o.deleted, "leave");
        if o.reroute || o.deleted {
            st.mc_changed.insert(o.mlid);
        }
        st.push_mc_notice(o.notice);
        o.record
    } else {
        let o = st.mc.join(db, &req).map_err(|e| {
            tracing::debug!(port = %req.record.port_gid, mgid = %req.record.mgid, "join refused: {e}");
            e.sa_status().to_mad_status()
        })?;
        tracing::debug!(mgid = %o.mgid, mlid = %o.mlid, port = %req.record.port_gid, created = o.created, "join");
        if o.reroute || o.created {
            st.mc_changed.insert(o.mlid);
        }
        st.push_mc_notice(o.notice);
        o.record
    };
    out.push_wire(&answer);
    Ok(())
}

/// A PathRecord to a multicast DGID (the caller checked the DGID component): the group's
/// path, or nothing.
pub(crate) fn multicast_path(
    db: &Db,
    st: &State,
    q: &Query<'_>,
    pr: &path_record::Repr,
    out: &mut Out,
) -> HResult {
    let m = q.mask;
    let Some(g) = st.mc.get(&pr.dgid) else {
        tracing::debug!(mgid = %pr.dgid, "PathRecord: no such multicast group");
        return Ok(());
    };
    let member = |guid: Guid| g.member(guid).is_some();
    if (m & pcomp::DLID != 0 && pr.dlid != g.mlid)
        || (m & pcomp::SGID != 0 && !member(pr.sgid.guid()))
        || (m & pcomp::SLID != 0
            && !db
                .port_by_lid(pr.slid)
                .is_some_and(|p| member(db.port(p).guid)))
        || (m & pcomp::P_KEY != 0 && pr.p_key != g.p_key)
        || (m & pcomp::SL != 0 && pr.sl != g.sl)
        || (m & pcomp::NUMB_PATH != 0 && q.method != Method::Get && pr.numb_path == 0)
        || (m & pcomp::FLOW_LABEL != 0 && pr.flow_label != g.flow_label)
        || (m & pcomp::HOP_LIMIT != 0 && pr.hop_limit != g.hop_limit)
        || (m & pcomp::TCLASS != 0 && pr.tclass != g.tclass)
    {
        return Ok(());
    }
    let hop_limit = if sm_mad::mcmember_record::mgid_scope(&g.mgid) == Some(Scope::LinkLocal) {
        g.hop_limit
    } else {
        0xFF
    };
    // The request with the group's parameters (OpenSM copies the query, then fills these).
    let rec = path_record::Repr {
        dgid: g.mgid,
        dlid: g.mlid,
        tclass: g.tclass,
        numb_path: 1,
        p_key: g.p_key,
        mtu_selector: Selector::Exactly,
        mtu: g.mtu,
        rate_selector: Selector::Exactly,
        rate: g.rate,
        packet_life_time_selector: Selector::Exactly,
        packet_life_time: g.packet_life_time,
        sl: g.sl,
        qos_class: 0,
        hop_limit,
        flow_label: g.flow_label,
        ..*pr
    };
    out.push_wire(&rec);
    Ok(())
}

/// Whether a GID is a multicast GID.
pub(crate) fn is_multicast(g: &Gid) -> bool {
    g.0[0] == 0xff
}
