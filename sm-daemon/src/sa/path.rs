//! PathRecord and MultiPathRecord, computed from the forwarding tables the SM programmed, the
//! way OpenSM 3.3.23 computes them (`osm_sa_path_record.c`, `osm_sa_multipath_record.c`):
//!
//! - the path is walked hop by hop through the LFTs from the source port to the
//!   destination LID; MTU is the smallest MTUCap and rate the slowest active link rate of
//!   every port crossed (source, each switch's ingress and egress, destination);
//! - P_Key: the requested one if both ends share it, else the first partition both ends
//!   share (the source's key, in OpenSM's table order); no shared partition, no path;
//! - SL: the requested one, else the partition's; with QoS, an SL the SL-to-VL tables drop
//!   on the way disqualifies the path;
//! - PacketLifeTime: the subnet timeout the SM programs (0 for a port to itself) — OpenSM
//!   does not derive it from the hop count;
//! - selectors (GreaterThan, LessThan, Exactly, Largest) on MTU, rate and packet lifetime
//!   as OpenSM applies them; Reversible when the reverse walk succeeds;
//! - LMC: the "fully redundant" LID pairs first (preference 0), then the others
//!   (preference 2), up to NumbPath; a Get returns one.

use sm_mad::link::{Mtu, Rate};
use sm_mad::mad::MadStatus;
use sm_mad::multipath_record as mpr;
use sm_mad::path_record::{self, Selector, comp};
use sm_mad::service_record::ServiceId;
use sm_mad::{Gid, Lid, Method, PKey, Sl, sa};

use super::State;
use sm_core::fabric::PortIdx;

use super::db::Db;
use super::records::{HResult, Out, Query};

/// Longest path OpenSM walks.
const MAX_HOPS: u32 = 64;
/// OpenSM's cap on MultiPathRecord answers without NumbPath.
const MPR_MAX_PATHS: u32 = 127;

/// What a query asks of a path, common to PathRecord and MultiPathRecord.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Want {
    pub(crate) mtu: Option<(Selector, u8)>,
    pub(crate) rate: Option<(Selector, Rate)>,
    pub(crate) life: Option<(Selector, u8)>,
    pub(crate) pkey: Option<PKey>,
    pub(crate) sl: Option<Sl>,
    /// Raw traffic asked for: no P_Key in the answer.
    pub(crate) raw: bool,
    /// Only reversible paths.
    pub(crate) reversible: bool,
}

/// A computed path's properties.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Parms {
    pub(crate) mtu: u8,
    pub(crate) rate: Rate,
    pub(crate) life: u8,
    pub(crate) pkey: PKey,
    pub(crate) sl: u8,
}

fn slower(a: Rate, b: Rate) -> Rate {
    match (a.mbps(), b.mbps()) {
        (Some(x), Some(y)) if y < x => b,
        (None, Some(_)) => b,
        _ => a,
    }
}

fn cmp_rate(a: Rate, b: Rate) -> core::cmp::Ordering {
    a.mbps().unwrap_or(0).cmp(&b.mbps().unwrap_or(0))
}

/// Walks from end port `src` (LID `slid`) to end port `dst` (LID `dlid`) and applies the
/// query's constraints; `None` when there is no such path.
pub(crate) fn path_parms(
    db: &Db,
    w: &Want,
    src: PortIdx,
    dst: PortIdx,
    dlid: Lid,
) -> Option<Parms> {
    let sp = db.port(src);
    let mut mtu = sp.mtu_cap;
    let mut rate = Rate::from_raw_value(sp.rate);
    let mut sl_ok: u16 = 0xFFFF;
    let qos = db.p.qos;
    let drop_vls = |out: PortIdx, inp: u8, mask: &mut u16| {
        if let Some(t) = db.sl2vl.get(&(out, inp)) {
            for (sl, vl) in t.sl_to_vl.iter().enumerate() {
                if vl.0 == 15 {
                    *mask &= !(1 << sl);
                }
            }
        }
    };
    // A switch source leaves by the port its table gives; a switch destination is reached
    // at the port its own table gives (port 0).
    let egress = |p: PortIdx| -> Option<PortIdx> {
        let node = db.port(p).node;
        if !db.is_switch(node) {
            return Some(p);
        }
        db.port_of(node, db.route(node, dlid))
    };
    let mut p = egress(src)?;
    if qos {
        drop_vls(p, 0, &mut sl_ok);
        if sl_ok == 0 {
            return None;
        }
    }
    let dst_p = egress(dst)?;
    let mut hops = 0;
    while p != dst_p {
        p = db.port(p).remote?;
        if p == dst_p {
            break;
        }
        let node = db.port(p).node;
        if !db.is_switch(node) {
            return None;
        }
        let inp = db.port(p).num;
        mtu = mtu.min(db.port(p).mtu_cap);
        rate = slower(rate, Rate::from_raw_value(db.port(p).rate));
        p = db.port_of(node, db.route(node, dlid))?;
        mtu = mtu.min(db.port(p).mtu_cap);
        rate = slower(rate, Rate::from_raw_value(db.port(p).rate));
        if qos {
            drop_vls(p, inp, &mut sl_ok);
            if sl_ok == 0 {
                return None;
            }
        }
        hops += 1;
        if hops > MAX_HOPS {
            return None;
        }
    }
    mtu = mtu.min(db.port(p).mtu_cap);
    rate = slower(rate, Rate::from_raw_value(db.port(p).rate));

    let mut life = if src == dst { 0 } else { db.p.subnet_timeout };
    if let Some((sel, want)) = w.mtu {
        match sel {
            Selector::GreaterThan if mtu <= want => return None,
            Selector::LessThan if mtu >= want => {
                if want > 1 {
                    mtu = want - 1;
                } else {
                    return None;
                }
            }
            Selector::Exactly if mtu < want => return None,
            Selector::Exactly => mtu = want,
            _ => {}
        }
    }
    if let Some((sel, want)) = w.rate {
        match sel {
            Selector::GreaterThan if cmp_rate(rate, want).is_le() => return None,
            Selector::LessThan if cmp_rate(rate, want).is_ge() => rate = want.slower()?,
            Selector::Exactly if cmp_rate(rate, want).is_ne() => return None,
            Selector::Exactly => rate = want,
            _ => {}
        }
    }
    if let Some((sel, want)) = w.life {
        match sel {
            Selector::GreaterThan if life <= want => return None,
            Selector::LessThan if life >= want => {
                if want > 1 {
                    life = want - 1;
                } else {
                    return None;
                }
            }
            Selector::Exactly if life < want => return None,
            Selector::Exactly => life = want,
            _ => {}
        }
    }
    let pkey = match w.pkey {
        _ if w.raw => db.common_pkey(src, dst).unwrap_or(PKey(0)),
        Some(k) => {
            if !db.share_this_pkey(src, dst, k) {
                return None;
            }
            k
        }
        None => db.common_pkey(src, dst)?,
    };
    let sl = match (w.sl, db.path_sl(src, dlid)) {
        // The routes put this path on an SL to stay deadlock-free: another one is no path
        // (as OpenSM answers when its routing engine chose the SL).
        (Some(s), Some(routed)) if s.0 != routed => return None,
        (_, Some(routed)) => routed,
        (Some(s), None) => s.0,
        (None, None) if !pkey.is_invalid() => {
            db.partition_sl.get(&pkey.base()).copied().unwrap_or(0)
        }
        (None, None) if qos && sl_ok & 1 == 0 => sl_ok.trailing_zeros() as u8,
        (None, None) => 0,
    };
    if qos && sl_ok & (1 << (sl & 15)) == 0 {
        return None;
    }
    Some(Parms {
        mtu,
        rate,
        life,
        pkey: if w.raw { PKey(0) } else { pkey },
        sl,
    })
}

/// One path record for a LID pair, or `None`.
#[allow(clippy::too_many_arguments)]
fn lid_pair(
    db: &Db,
    w: &Want,
    src: PortIdx,
    dst: PortIdx,
    slid: u16,
    dlid: u16,
    sgid: Option<Gid>,
    preference: u8,
) -> Option<path_record::Repr> {
    let parms = path_parms(db, w, src, dst, Lid(dlid))?;
    let reversible = path_parms(db, w, dst, src, Lid(slid)).is_some();
    if w.reversible && !reversible {
        return None;
    }
    let prefix = db.p.subnet_prefix;
    Some(path_record::Repr {
        service_id: ServiceId(0),
        dgid: Gid::new(prefix, db.port(dst).guid),
        sgid: sgid.unwrap_or_else(|| Gid::new(prefix, db.port(src).guid)),
        dlid: Lid(dlid),
        slid: Lid(slid),
        raw_traffic: false,
        flow_label: 0,
        hop_limit: 0,
        tclass: 0,
        reversible,
        numb_path: 0,
        p_key: parms.pkey,
        qos_class: 0,
        sl: Sl(parms.sl),
        mtu_selector: Selector::Exactly,
        mtu: Mtu::from_raw_value(parms.mtu),
        rate_selector: Selector::Exactly,
        rate: parms.rate,
        packet_life_time_selector: Selector::Exactly,
        packet_life_time: parms.life,
        preference,
    })
}

/// The paths between two end ports (OpenSM's `get_port_pair_paths`): LID pairs of the LMC
/// ranges (or the given LIDs), fully redundant pairs first. Returns how many were added.
#[allow(clippy::too_many_arguments)]
fn port_pair(
    db: &Db,
    w: &Want,
    req: PortIdx,
    src: PortIdx,
    dst: PortIdx,
    slid: Option<Lid>,
    dlid: Option<Lid>,
    sgid: Option<Gid>,
    limit: u32,
    out: &mut Out,
) -> u32 {
    if !db.share_pkey(req, src) || !db.share_pkey(req, dst) || !db.share_pkey(src, dst) {
        return 0;
    }
    let (dmin, dmax) = match dlid {
        Some(l) => (l.0, l.0),
        None => db.lid_range(dst),
    };
    let (smin, smax) = match slid {
        Some(l) => (l.0, l.0),
        None => db.lid_range(src),
    };
    if smin == 0 || dmin == 0 {
        return 0;
    }
    let mut n = 0u32;
    let add = |s: u16, d: u16, pref: u8, out: &mut Out| {
        if let Some(r) = lid_pair(db, w, src, dst, s, d, sgid, pref) {
            out.push_wire(&r);
            true
        } else {
            false
        }
    };
    let (mut s, mut d) = (smin, dmin);
    while n < limit && out.open() {
        if add(s, d, 0, out) {
            n += 1;
        }
        s += 1;
        d += 1;
        if s > smax || d > dmax {
            break;
        }
    }
    if n >= limit {
        return n;
    }
    let (mut s, mut d) = (smin, dmin);
    let (mut so, mut dof) = (0u16, 0u16);
    while n < limit && out.open() {
        dof += 1;
        d += 1;
        if d > dmax {
            so += 1;
            s += 1;
            if s > smax {
                break;
            }
            dof = 0;
            d = dmin;
        }
        if so == dof {
            continue;
        }
        if add(s, d, 2, out) {
            n += 1;
        }
    }
    n
}

fn valid_mtu(code: u8) -> bool {
    (1..=5).contains(&code)
}

/// Resolves a GID to an end port (OpenSM: a foreign subnet prefix, or an unknown GUID, is
/// ERR_REQ_INVALID_GID; there are no routers to forward to).
fn gid_port(db: &Db, gid: Gid) -> Result<PortIdx, MadStatus> {
    let link_local = gid.prefix() == 0xfe80_0000_0000_0000;
    if !link_local && gid.prefix() != db.p.subnet_prefix {
        return Err(sa::ERR_REQ_INVALID_GID);
    }
    db.port_by_guid(gid.guid()).ok_or(sa::ERR_REQ_INVALID_GID)
}

pub(crate) fn path_records(db: &Db, st: &State, q: &Query<'_>, out: &mut Out) -> HResult {
    let m = q.mask;
    let pr = path_record::Repr::parse(q.rec).map_err(|_| sa::ERR_REQ_INVALID)?;
    let both = |a: u64, b: u64| m & a != 0 && m & b != 0;
    if both(comp::RATE_SELECTOR, comp::RATE) && pr.rate.mbps().is_none() {
        return Err(sa::ERR_REQ_INVALID);
    }
    if both(comp::MTU_SELECTOR, comp::MTU) && !valid_mtu(pr.mtu.to_raw_value()) {
        return Err(sa::ERR_REQ_INVALID);
    }
    let sid = m & comp::SERVICE_ID;
    if sid != 0 && sid != comp::SERVICE_ID {
        return Err(sa::ERR_REQ_INSUFFICIENT_COMPONENTS);
    }
    if m & comp::DGID != 0 && super::mcast::is_multicast(&pr.dgid) {
        return super::mcast::multicast_path(db, st, q, &pr, out);
    }
    let w = Want {
        mtu: both(comp::MTU_SELECTOR, comp::MTU)
            .then_some((pr.mtu_selector, pr.mtu.to_raw_value())),
        rate: both(comp::RATE_SELECTOR, comp::RATE).then_some((pr.rate_selector, pr.rate)),
        life: both(comp::PACKET_LIFE_TIME_SELECTOR, comp::PACKET_LIFE_TIME)
            .then_some((pr.packet_life_time_selector, pr.packet_life_time)),
        pkey: (m & comp::P_KEY != 0).then_some(pr.p_key),
        sl: (m & comp::SL != 0).then_some(pr.sl),
        raw: m & comp::RAW_TRAFFIC != 0 && pr.raw_traffic,
        reversible: m & comp::REVERSIBLE != 0 && pr.reversible,
    };
    let src_gid = if m & comp::SGID != 0 {
        Some(gid_port(db, pr.sgid)?)
    } else {
        None
    };
    let dst_gid = if m & comp::DGID != 0 {
        Some(gid_port(db, pr.dgid)?)
    } else {
        None
    };
    // An unknown LID has no paths (OpenSM answers an empty table).
    let src_lid = match m & comp::SLID != 0 {
        true => match db.port_by_lid(pr.slid) {
            Some(p) => Some(p),
            None => return Ok(()),
        },
        false => None,
    };
    let dst_lid = match m & comp::DLID != 0 {
        true => match db.port_by_lid(pr.dlid) {
            Some(p) => Some(p),
            None => return Ok(()),
        },
        false => None,
    };
    if matches!((src_gid, src_lid), (Some(a), Some(b)) if a != b)
        || matches!((dst_gid, dst_lid), (Some(a), Some(b)) if a != b)
    {
        return Err(sa::ERR_REQ_INVALID);
    }
    let limit = if q.method == Method::Get {
        1
    } else if m & comp::NUMB_PATH != 0 {
        u32::from(pr.numb_path)
    } else {
        u32::MAX
    };
    let slid = (m & comp::SLID != 0).then_some(pr.slid);
    let dlid = (m & comp::DLID != 0).then_some(pr.dlid);
    let sgid = (m & comp::SGID != 0).then_some(pr.sgid);
    let pair = |src: PortIdx, dst: PortIdx, out: &mut Out| {
        port_pair(db, &w, q.req, src, dst, slid, dlid, sgid, limit, out);
    };
    // The end ports of the subnet, for a "half world" query (one end given), in port order.
    let ends = || {
        db.port_indices()
            .filter(|&p| db.port_by_guid(db.port(p).guid) == Some(p) && db.port(p).known)
    };
    let done = |out: &Out| q.method == Method::Get && out.count > 0 || !out.open();
    match (src_gid.or(src_lid), dst_gid.or(dst_lid)) {
        (Some(src), Some(dst)) => pair(src, dst, out),
        (None, Some(dst)) => {
            for src in ends() {
                if done(out) {
                    break;
                }
                pair(src, dst, out);
            }
        }
        (Some(src), None) => {
            for dst in ends() {
                if done(out) {
                    break;
                }
                pair(src, dst, out);
            }
        }
        (None, None) => {
            // The whole world, as OpenSM answers it (osmtest's inventory validation asks):
            // N^2 records, bounded by the answer's size limit.
            'all: for src in ends() {
                for dst in ends() {
                    if done(out) {
                        break 'all;
                    }
                    pair(src, dst, out);
                }
            }
        }
    }
    Ok(())
}

pub(crate) fn multipath_records(db: &Db, q: &Query<'_>, out: &mut Out) -> HResult {
    use mpr::comp as c;
    let m = q.mask;
    if m & c::SGID_COUNT == 0 || m & c::DGID_COUNT == 0 {
        return Err(sa::ERR_REQ_INSUFFICIENT_COMPONENTS);
    }
    let r = mpr::Repr::parse(q.rec).map_err(|_| sa::ERR_REQ_INVALID)?;
    let both = |a: u64, b: u64| m & a != 0 && m & b != 0;
    if both(c::RATE_SELECTOR, c::RATE) && r.rate.mbps().is_none() {
        return Err(sa::ERR_REQ_INVALID);
    }
    if both(c::MTU_SELECTOR, c::MTU) && !valid_mtu(r.mtu.to_raw_value()) {
        return Err(sa::ERR_REQ_INVALID);
    }
    let sid = m & c::SERVICE_ID;
    if sid != 0 && sid != c::SERVICE_ID {
        return Err(sa::ERR_REQ_INSUFFICIENT_COMPONENTS);
    }
    let nsrc = usize::from(r.sgid_count).min(mpr::MAX_GIDS);
    let ndst = usize::from(r.dgid_count).min(mpr::MAX_GIDS - nsrc);
    let mut ports = Vec::with_capacity(nsrc + ndst);
    for (i, gid) in r.gids[..nsrc + ndst].iter().enumerate() {
        if i < nsrc && gid.0[0] == 0xff {
            return Err(sa::ERR_REQ_INVALID_GID);
        }
        ports.push(gid_port(db, *gid)?);
    }
    if nsrc == 0 || ndst == 0 {
        return Err(sa::ERR_REQ_INVALID);
    }
    let w = Want {
        mtu: both(c::MTU_SELECTOR, c::MTU).then_some((r.mtu_selector, r.mtu.to_raw_value())),
        rate: both(c::RATE_SELECTOR, c::RATE).then_some((r.rate_selector, r.rate)),
        life: both(c::PACKET_LIFE_TIME_SELECTOR, c::PACKET_LIFE_TIME)
            .then_some((r.packet_life_time_selector, r.packet_life_time)),
        pkey: (m & c::P_KEY != 0).then_some(r.p_key),
        sl: (m & c::SL != 0).then_some(r.sl),
        raw: m & c::RAW_TRAFFIC != 0 && r.raw_traffic,
        reversible: m & c::REVERSIBLE != 0 && r.reversible,
    };
    let max = if m & c::NUMB_PATH != 0 {
        u32::from(r.numb_path & 0x7f)
    } else {
        MPR_MAX_PATHS
    };
    let mut total = 0;
    'all: for &s in &ports[..nsrc] {
        for &d in &ports[nsrc..] {
            if total >= max || !out.open() {
                break 'all;
            }
            total += port_pair(db, &w, q.req, s, d, None, None, None, max - total, out);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_order() {
        assert_eq!(slower(Rate::Gbps40, Rate::Gbps10), Rate::Gbps10);
        assert_eq!(slower(Rate::Gbps10, Rate::Gbps40), Rate::Gbps10);
        assert_eq!(slower(Rate::Gbps30, Rate::Gbps28), Rate::Gbps28);
        assert!(cmp_rate(Rate::Gbps5, Rate::Gbps2_5).is_gt());
    }
}
