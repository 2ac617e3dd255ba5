//! The record handlers: one function per SA attribute, each enumerating candidates from the
//! [`Db`] in OpenSM's order, filtering them by the requester's partitions and the query's
//! component mask, and pushing matching records into an [`Out`].
//!
//! Components with special semantics (LIDs that match any LID of an LMC range, the
//! enhanced capability-mask compare, inputs such as PortInfoRecord's Options) are checked by
//! the handler and skipped by the generic compare.

use sm_core::fabric::{NodeIdx, NodeKind, PortIdx};
use sm_mad::mad::MadStatus;
use sm_mad::{
    Guid, Lid, Method, PortNum, Wire, class_port_info, guid_info, guid_info_record, lft,
    lft_record, link_record, mft_record, node_record, pkey_table, pkey_table_record, port_info,
    port_info_record, sa, sl2vl, sl2vl_record, sm_info, sm_info_record, switch_info_record, vl_arb,
    vl_arb_record,
};

use super::State;
use super::db::Db;
use super::mask::{Rec, layout};
use super::{Requester, inform, mcast, service};
use crate::core::time::Instant;

/// One query, as the handlers see it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Query<'a> {
    pub(crate) method: Method,
    pub(crate) mask: u64,
    /// The template record: the request's SA data, zero-padded to at least the record.
    pub(crate) rec: &'a [u8],
    pub(crate) attr_mod: u32,
    /// The requester proved the SM_Key.
    pub(crate) trusted: bool,
    /// The requester's end port in the [`Db`].
    pub(crate) req: PortIdx,
    /// Where the request came from (subscriptions keep it as their report address).
    pub(crate) from: Requester,
    /// The core's clock (service leases).
    pub(crate) now: Instant,
}

/// The records of an answer, each `len` bytes, laid out `attribute_offset * 8` apart.
#[derive(Debug, Clone)]
pub(crate) struct Out {
    pub(crate) len: usize,
    pub(crate) stride: usize,
    pub(crate) data: Vec<u8>,
    pub(crate) count: usize,
    /// Stop collecting after this many (a Get needs two to know it has too many).
    pub(crate) limit: usize,
}

impl Out {
    pub(crate) fn new(len: usize, limit: usize) -> Out {
        let stride = len.div_ceil(8) * 8;
        Out {
            len,
            stride,
            data: Vec::new(),
            count: 0,
            limit,
        }
    }

    /// Room for more.
    pub(crate) fn open(&self) -> bool {
        self.count < self.limit
    }

    /// Appends one record (its first `len` bytes).
    pub(crate) fn push(&mut self, rec: &[u8]) {
        if !self.open() {
            return;
        }
        let start = self.data.len();
        self.data.resize(start + self.stride, 0);
        let n = rec.len().min(self.len);
        self.data[start..start + n].copy_from_slice(&rec[..n]);
        self.count += 1;
    }

    /// Emits `r` and appends it.
    pub(crate) fn push_wire<W: Wire>(&mut self, r: &W) {
        let mut buf = [0u8; 256];
        if r.emit(&mut buf).is_ok() {
            self.push(&buf);
        }
    }
}

/// What a handler returns: records in `out`, or a status for the whole query.
pub(crate) type HResult = Result<(), MadStatus>;

/// A query answered from the snapshot alone.
pub(crate) type DbFn = fn(&Db, &Query<'_>, &mut Out) -> HResult;
/// A query answered from the snapshot and the SA's own state (groups, services, informs).
pub(crate) type StateFn = fn(&Db, &State, &Query<'_>, &mut Out) -> HResult;
/// A Set or Delete: changes the SA's state and answers with one record.
pub(crate) type SetFn = fn(&Db, &mut State, &Query<'_>, &mut Out) -> HResult;

/// How Get / GetTable (/ GetMulti) are answered.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Run {
    Db(DbFn),
    State(StateFn),
    /// Only Set / Delete.
    None,
}

/// An attribute the SA serves.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Handler {
    pub(crate) attr: u16,
    /// Record length on the wire.
    pub(crate) len: usize,
    /// Methods the attribute takes; any other is answered 0x000C.
    pub(crate) methods: &'static [Method],
    /// Its component layout (unknown mask bits are ERR_REQ_INVALID).
    pub(crate) layout: Option<Rec>,
    pub(crate) run: Run,
    /// Set and Delete, for the attributes that take them.
    pub(crate) set: Option<SetFn>,
}

const GET_TABLE: &[Method] = &[Method::Get, Method::GetTable];
const GET_TABLE_SET_DELETE: &[Method] =
    &[Method::Get, Method::GetTable, Method::Set, Method::Delete];

/// Every attribute served, by attribute id: adding an attribute is adding a row and its
/// functions.
pub(crate) const HANDLERS: &[Handler] = &[
    Handler {
        attr: sm_mad::attr::CLASS_PORT_INFO,
        len: class_port_info::LEN,
        methods: &[Method::Get],
        layout: None,
        run: Run::None, // answered by the server itself
        set: None,
    },
    Handler {
        attr: node_record::ATTR_ID,
        len: node_record::LEN,
        methods: GET_TABLE,
        layout: Some(Rec::Node),
        run: Run::Db(node_records),
        set: None,
    },
    Handler {
        attr: port_info_record::ATTR_ID,
        len: port_info_record::LEN,
        methods: GET_TABLE,
        layout: Some(Rec::PortInfo),
        run: Run::Db(port_info_records),
        set: None,
    },
    Handler {
        attr: sl2vl_record::ATTR_ID,
        len: sl2vl_record::LEN,
        methods: GET_TABLE,
        layout: Some(Rec::SlToVl),
        run: Run::Db(sl2vl_records),
        set: None,
    },
    Handler {
        attr: switch_info_record::ATTR_ID,
        len: switch_info_record::LEN,
        methods: GET_TABLE,
        layout: Some(Rec::SwitchInfo),
        run: Run::Db(switch_info_records),
        set: None,
    },
    Handler {
        attr: lft_record::ATTR_ID,
        len: lft_record::LEN,
        methods: GET_TABLE,
        layout: Some(Rec::Lft),
        run: Run::Db(lft_records),
        set: None,
    },
    Handler {
        attr: mft_record::ATTR_ID,
        len: mft_record::LEN,
        methods: GET_TABLE,
        layout: Some(Rec::Mft),
        run: Run::Db(mft_records),
        set: None,
    },
    Handler {
        attr: sm_info_record::ATTR_ID,
        len: sm_info_record::LEN,
        methods: GET_TABLE,
        layout: Some(Rec::SmInfo),
        run: Run::Db(sm_info_records),
        set: None,
    },
    Handler {
        attr: link_record::ATTR_ID,
        len: link_record::LEN,
        methods: GET_TABLE,
        layout: Some(Rec::Link),
        run: Run::Db(link_records),
        set: None,
    },
    Handler {
        attr: guid_info_record::ATTR_ID,
        len: guid_info_record::LEN,
        methods: GET_TABLE,
        layout: Some(Rec::GuidInfo),
        run: Run::Db(guid_info_records),
        set: None,
    },
    Handler {
        attr: pkey_table_record::ATTR_ID,
        len: pkey_table_record::LEN,
        methods: GET_TABLE,
        layout: Some(Rec::PKeyTable),
        run: Run::Db(pkey_table_records),
        set: None,
    },
    Handler {
        attr: sm_mad::path_record::ATTR_ID,
        len: sm_mad::path_record::LEN,
        methods: GET_TABLE,
        layout: Some(Rec::Path),
        run: Run::State(super::path::path_records),
        set: None,
    },
    Handler {
        attr: vl_arb_record::ATTR_ID,
        len: vl_arb_record::LEN,
        methods: GET_TABLE,
        layout: Some(Rec::VlArb),
        run: Run::Db(vl_arb_records),
        set: None,
    },
    Handler {
        attr: sm_mad::multipath_record::ATTR_ID,
        len: sm_mad::path_record::LEN,
        methods: &[Method::GetMulti],
        layout: Some(Rec::MultiPath),
        run: Run::Db(super::path::multipath_records),
        set: None,
    },
    Handler {
        attr: sm_mad::mcmember_record::ATTR_ID,
        len: sm_mad::mcmember_record::LEN,
        methods: GET_TABLE_SET_DELETE,
        layout: Some(Rec::McMember),
        run: Run::State(mcast::mcmember_records),
        set: Some(mcast::mcmember_set),
    },
    Handler {
        attr: sm_mad::service_record::ATTR_ID,
        len: sm_mad::service_record::LEN,
        methods: GET_TABLE_SET_DELETE,
        layout: Some(Rec::Service),
        run: Run::State(service::service_records),
        set: Some(service::service_set),
    },
    Handler {
        attr: sm_mad::inform_info::ATTR_ID,
        len: sm_mad::inform_info::LEN,
        methods: &[Method::Set],
        layout: None,
        run: Run::None,
        set: Some(inform::inform_info_set),
    },
    Handler {
        attr: sm_mad::inform_info_record::ATTR_ID,
        len: sm_mad::inform_info_record::LEN,
        methods: GET_TABLE,
        layout: Some(Rec::InformInfoRecord),
        run: Run::State(inform::inform_info_records),
        set: None,
    },
];

/// The handler of an attribute.
pub(crate) fn handler(attr: u16) -> Option<&'static Handler> {
    HANDLERS.iter().find(|h| h.attr == attr)
}

/// A record LID `q` matches the LID range `lo..=hi`.
fn in_range(q: u16, (lo, hi): (u16, u16)) -> bool {
    lo <= q && q <= hi
}

/// Nodes to look at: the node owning `lid` when the query names one, else all.
fn nodes_for(db: &Db, lid: Option<Lid>) -> Vec<NodeIdx> {
    match lid {
        Some(l) => db
            .port_by_lid(l)
            .map(|p| vec![db.port(p).node])
            .unwrap_or_default(),
        None => db.node_indices().collect(),
    }
}

/// The end port of a node: port 0 of a switch, else none (CAs have one per port).
fn switch_port0(db: &Db, n: NodeIdx) -> Option<PortIdx> {
    db.is_switch(n).then(|| db.port_of(n, 0)).flatten()
}

/// The switches a query may see: each node (the one owning `by_lid` when given) that is a
/// switch whose port-0 LID range holds `by_lid` and that shares a partition with the
/// requester; with its node index, port 0 and LID range.
fn visible_switches<'a>(
    db: &'a Db,
    q: &'a Query<'_>,
    by_lid: Option<Lid>,
) -> impl Iterator<Item = (NodeIdx, PortIdx, (u16, u16))> + 'a {
    nodes_for(db, by_lid).into_iter().filter_map(move |n| {
        let p0 = switch_port0(db, n)?;
        let range = db.lid_range(p0);
        (db.share_pkey(q.req, p0) && by_lid.is_none_or(|l| in_range(l.0, range)))
            .then_some((n, p0, range))
    })
}

/// The end ports of a node: port 0 of a switch, else every port the SM knows.
fn end_ports(db: &Db, n: NodeIdx) -> Vec<PortIdx> {
    match switch_port0(db, n) {
        Some(p0) => vec![p0],
        None => (1..=db.node(n).num_ports)
            .filter_map(|k| db.port_of(n, k))
            .filter(|&p| db.port(p).known)
            .collect(),
    }
}

fn node_records(db: &Db, q: &Query<'_>, out: &mut Out) -> HResult {
    use node_record::comp;
    let l = layout(Rec::Node);
    let tmpl = node_record::Repr::parse(q.rec).map_err(|_| sa::ERR_REQ_INVALID)?;
    let by_lid = (q.mask & comp::LID != 0).then_some(tmpl.lid);
    let mut buf = [0u8; node_record::LEN];
    for n in nodes_for(db, by_lid) {
        let node = db.node(n);
        for p in end_ports(db, n) {
            if !out.open() {
                return Ok(());
            }
            if !db.share_pkey(p, q.req) {
                continue;
            }
            let range = db.lid_range(p);
            if by_lid.is_some_and(|l| !in_range(l.0, range)) {
                continue;
            }
            let port = db.port(p);
            let mut info = *node.info;
            info.port_guid = port.guid;
            info.local_port_num = port.num;
            let rec = node_record::Repr {
                lid: Lid(range.0),
                node_info: info,
                node_description: node.desc(),
            };
            if rec.emit(&mut buf).is_ok() && l.matches(q.rec, &buf, q.mask, comp::LID) {
                out.push(&buf);
            }
        }
    }
    Ok(())
}

fn port_info_records(db: &Db, q: &Query<'_>, out: &mut Out) -> HResult {
    use port_info_record::comp;
    let l = layout(Rec::PortInfo);
    let tmpl = port_info_record::Repr::parse(q.rec).map_err(|_| sa::ERR_REQ_INVALID)?;
    let enhanced = q.attr_mod & (1 << 31) != 0;
    let by_lid = if q.mask & comp::ENDPORT_LID != 0 {
        Some(tmpl.endport_lid)
    } else if q.mask & comp::LID != 0 {
        Some(tmpl.port_info.lid)
    } else {
        None
    };
    let mut skip = comp::ENDPORT_LID | comp::OPTIONS;
    let ext =
        comp::LINK_SPEED_EXT_ACTIVE | comp::LINK_SPEED_EXT_SUPPORTED | comp::LINK_SPEED_EXT_ENABLED;
    skip |= ext;
    if enhanced {
        skip |= comp::CAPABILITY_MASK | comp::CAPABILITY_MASK2;
    }
    let want = tmpl.port_info;
    let mut buf = [0u8; port_info_record::LEN];
    for n in nodes_for(db, by_lid) {
        let node = db.node(n);
        let nums: Vec<u8> = if q.mask & comp::PORT_NUM != 0 {
            vec![tmpl.port_num]
        } else {
            let first = u8::from(node.kind != NodeKind::Switch);
            (first..=node.num_ports).collect()
        };
        let caps_port = switch_port0(db, n);
        for k in nums {
            if !out.open() {
                return Ok(());
            }
            let Some(p) = db.port_of(n, k) else { continue };
            let port = db.port(p);
            if !port.known || !db.share_pkey(q.req, p) {
                continue;
            }
            let pi = *port.info;
            if enhanced {
                if q.mask & comp::CAPABILITY_MASK != 0
                    && want.capability_mask & pi.capability_mask != want.capability_mask
                {
                    continue;
                }
                if q.mask & comp::CAPABILITY_MASK2 != 0
                    && want.capability_mask2 & pi.capability_mask2 != want.capability_mask2
                {
                    continue;
                }
            }
            let caps = caps_port.map_or(pi.capability_mask, |p0| db.port(p0).info.capability_mask);
            let has_ext = caps & port_info::cap::IS_EXTENDED_SPEEDS_SUPPORTED != 0;
            if has_ext
                && ((q.mask & comp::LINK_SPEED_EXT_ACTIVE != 0
                    && want.link_speed_ext_active != pi.link_speed_ext_active)
                    || (q.mask & comp::LINK_SPEED_EXT_SUPPORTED != 0
                        && want.link_speed_ext_supported != pi.link_speed_ext_supported)
                    || (q.mask & comp::LINK_SPEED_EXT_ENABLED != 0
                        && want.link_speed_ext_enabled != pi.link_speed_ext_enabled))
            {
                continue;
            }
            let range = db.lid_range(p);
            if q.mask & comp::ENDPORT_LID != 0 && !in_range(tmpl.endport_lid.0, range) {
                continue;
            }
            let mut rec = port_info_record::Repr {
                endport_lid: Lid(range.0),
                port_num: k,
                options: 0,
                port_info: pi,
            };
            // Compare on what the port holds, then answer as OpenSM does.
            if rec.emit(&mut buf).is_err() || !l.matches(q.rec, &buf, q.mask, skip) {
                continue;
            }
            if q.mask & comp::OPTIONS != 0 {
                rec.options = tmpl.options;
            }
            let qdr_off = q.mask & comp::OPTIONS != 0
                && tmpl.options & port_info_record::options::QDR_NOT_OVERLOADED != 0;
            if !qdr_off && has_ext && pi.link_speed_ext_active != 0 {
                // Extended speeds active: the QDR bit is added to the legacy speeds.
                rec.port_info.link_speed_enabled |= 4;
                rec.port_info.link_speed_supported |= 4;
                rec.port_info.link_speed_active |= 4;
            }
            if !q.trusted {
                rec.port_info.m_key = 0;
            }
            out.push_wire(&rec);
        }
    }
    Ok(())
}

fn switch_info_records(db: &Db, q: &Query<'_>, out: &mut Out) -> HResult {
    use switch_info_record::comp;
    let l = layout(Rec::SwitchInfo);
    let tmpl = switch_info_record::Repr::parse(q.rec).map_err(|_| sa::ERR_REQ_INVALID)?;
    let by_lid = (q.mask & comp::LID != 0).then_some(tmpl.lid);
    if by_lid == Some(Lid(0)) {
        return Ok(());
    }
    let mut buf = [0u8; switch_info_record::LEN];
    for (n, _, range) in visible_switches(db, q, by_lid) {
        if !out.open() {
            return Ok(());
        }
        let Some(&switch_info) = db.node(n).switch else {
            continue;
        };
        let rec = switch_info_record::Repr {
            lid: Lid(range.0),
            switch_info,
        };
        if rec.emit(&mut buf).is_ok() && l.matches(q.rec, &buf, q.mask, comp::LID) {
            out.push(&buf);
        }
    }
    Ok(())
}

fn lft_records(db: &Db, q: &Query<'_>, out: &mut Out) -> HResult {
    use lft_record::comp;
    let l = layout(Rec::Lft);
    let tmpl = lft_record::Repr::parse(q.rec).map_err(|_| sa::ERR_REQ_INVALID)?;
    let by_lid = (q.mask & comp::LID != 0).then_some(tmpl.lid);
    let mut buf = [0u8; lft_record::LEN];
    for (n, _, range) in visible_switches(db, q, by_lid) {
        let table = db.lft(n);
        if table.is_empty() {
            continue;
        }
        let max_block = ((table.len() - 1) / lft::ENTRIES) as u16;
        let blocks = if q.mask & comp::BLOCK_NUM != 0 {
            if tmpl.block_num > max_block {
                continue;
            }
            tmpl.block_num..=tmpl.block_num
        } else {
            0..=max_block
        };
        for b in blocks {
            if !out.open() {
                return Ok(());
            }
            let mut t = lft::Repr::default();
            let start = b as usize * lft::ENTRIES;
            for (slot, port) in t.port_block.iter_mut().zip(table.run(start, lft::ENTRIES)) {
                *slot = PortNum(*port);
            }
            let rec = lft_record::Repr {
                lid: Lid(range.0),
                block_num: b,
                linear_forwarding_table: t,
            };
            let skip = comp::LID | comp::BLOCK_NUM;
            if rec.emit(&mut buf).is_ok() && l.matches(q.rec, &buf, q.mask, skip) {
                out.push(&buf);
            }
        }
    }
    Ok(())
}

fn mft_records(db: &Db, q: &Query<'_>, out: &mut Out) -> HResult {
    use mft_record::comp;
    let l = layout(Rec::Mft);
    let tmpl = mft_record::Repr::parse(q.rec).map_err(|_| sa::ERR_REQ_INVALID)?;
    let by_lid = (q.mask & comp::LID != 0).then_some(tmpl.lid);
    let mut buf = [0u8; mft_record::LEN];
    for (n, _, range) in visible_switches(db, q, by_lid) {
        for (&(_, block, position), table) in db.mft.range((n, 0, 0)..=(n, u16::MAX, u8::MAX)) {
            if !out.open() {
                return Ok(());
            }
            if (q.mask & comp::BLOCK_NUM != 0 && block != tmpl.block_num)
                || (q.mask & comp::POSITION != 0 && position != tmpl.position)
            {
                continue;
            }
            let rec = mft_record::Repr {
                lid: Lid(range.0),
                position,
                block_num: block,
                multicast_forwarding_table: *table,
            };
            let skip = comp::LID | comp::BLOCK_NUM | comp::POSITION;
            if rec.emit(&mut buf).is_ok() && l.matches(q.rec, &buf, q.mask, skip) {
                out.push(&buf);
            }
        }
    }
    Ok(())
}

fn sm_info_records(db: &Db, q: &Query<'_>, out: &mut Out) -> HResult {
    use sm_info_record::comp;
    let l = layout(Rec::SmInfo);
    let tmpl = sm_info_record::Repr::parse(q.rec).map_err(|_| sa::ERR_REQ_INVALID)?;
    let Some(own) = db.port_by_guid(db.p.sm_port_guid) else {
        return Ok(());
    };
    let ours = sm_info::Repr {
        guid: db.p.sm_port_guid,
        sm_key: 0,
        act_count: db.act_count,
        priority: db.p.sm_priority,
        sm_state: db.p.sm_state,
    };
    let all =
        std::iter::once((Lid(db.lid_range(own).0), ours)).chain(db.remote_sms.iter().copied());
    for (lid, sm_info) in all {
        let Some(port) = db.port_by_lid(lid) else {
            continue;
        };
        if q.mask & comp::LID != 0 && db.port_by_lid(tmpl.lid) != Some(port) {
            continue;
        }
        if !db.share_pkey(q.req, port) {
            continue;
        }
        let rec = sm_info_record::Repr { lid, sm_info };
        let mut buf = [0u8; sm_info_record::LEN];
        // OpenSM compares GUID, priority and state only.
        let skip = comp::LID | comp::SM_KEY | comp::ACT_COUNT;
        if rec.emit(&mut buf).is_ok() && l.matches(q.rec, &buf, q.mask, skip) {
            out.push(&buf);
        }
    }
    Ok(())
}

fn link_records(db: &Db, q: &Query<'_>, out: &mut Out) -> HResult {
    use link_record::comp;
    let l = layout(Rec::Link);
    let tmpl = link_record::Repr::parse(q.rec).map_err(|_| sa::ERR_REQ_INVALID)?;
    let lmc_mask = !((1u16 << db.p.lmc.min(7)) - 1);
    let from = (q.mask & comp::FROM_LID != 0).then_some(tmpl.from_lid);
    let to = (q.mask & comp::TO_LID != 0).then_some(tmpl.to_lid);
    for lid in [from, to].into_iter().flatten() {
        if db.port_by_lid(lid).is_none() {
            return Ok(());
        }
    }
    let mut buf = [0u8; link_record::LEN];
    for n in nodes_for(db, from) {
        let node = db.node(n);
        for k in 1..=node.num_ports {
            if !out.open() {
                return Ok(());
            }
            let Some(p) = db.port_of(n, k) else { continue };
            let Some(r) = db.port(p).remote else {
                continue;
            };
            if !db.share_pkey(p, r) || !db.share_pkey(p, q.req) || !db.share_pkey(q.req, r) {
                continue;
            }
            let from_lid = db.lid_range(p).0;
            let to_lid = db.lid_range(r).0;
            if from.is_some_and(|f| f.0 & lmc_mask != from_lid)
                || to.is_some_and(|t| t.0 & lmc_mask != to_lid)
            {
                continue;
            }
            let rec = link_record::Repr {
                from_lid: Lid(from_lid),
                from_port: k,
                to_port: db.port(r).num,
                to_lid: Lid(to_lid),
            };
            let skip = comp::FROM_LID | comp::TO_LID;
            if rec.emit(&mut buf).is_ok() && l.matches(q.rec, &buf, q.mask, skip) {
                out.push(&buf);
            }
        }
    }
    Ok(())
}

fn guid_info_records(db: &Db, q: &Query<'_>, out: &mut Out) -> HResult {
    use guid_info_record::comp;
    let l = layout(Rec::GuidInfo);
    let tmpl = guid_info_record::Repr::parse(q.rec).map_err(|_| sa::ERR_REQ_INVALID)?;
    let by_lid = (q.mask & comp::LID != 0).then_some(tmpl.lid);
    let mut buf = [0u8; guid_info_record::LEN];
    for n in nodes_for(db, by_lid) {
        for p in end_ports(db, n) {
            let port = db.port(p);
            let cap = port.info.guid_cap;
            if cap == 0 || !db.share_pkey(p, q.req) {
                continue;
            }
            let range = db.lid_range(p);
            if by_lid.is_some_and(|l| !in_range(l.0, range)) {
                continue;
            }
            let blocks = cap.div_ceil(guid_info::BLOCK_LEN as u8);
            for b in 0..blocks {
                if !out.open() {
                    return Ok(());
                }
                let mut info = guid_info::Repr {
                    guid_block: [Guid(0); guid_info::BLOCK_LEN],
                };
                if b == 0 {
                    info.guid_block[0] = port.guid;
                }
                let rec = guid_info_record::Repr {
                    lid: Lid(range.0),
                    block_num: b,
                    guid_info: info,
                };
                if rec.emit(&mut buf).is_ok() && l.matches(q.rec, &buf, q.mask, comp::LID) {
                    out.push(&buf);
                }
            }
        }
    }
    Ok(())
}

/// The ports of an end port's node a per-port table query looks at: a CA's own port, or
/// every port of a switch (one when `port` names it).
fn table_ports(db: &Db, end: PortIdx, port: Option<u8>) -> Vec<PortIdx> {
    let n = db.port(end).node;
    let node = db.node(n);
    if node.kind != NodeKind::Switch {
        return vec![end];
    }
    match port {
        Some(k) => db.port_of(n, k).into_iter().collect(),
        None => (0..=node.num_ports)
            .filter_map(|k| db.port_of(n, k))
            .collect(),
    }
}

/// End ports a LID selects, or all of them in node order.
fn end_ports_for(db: &Db, lid: Option<Lid>) -> Vec<PortIdx> {
    match lid {
        Some(l) => db.port_by_lid(l).into_iter().collect(),
        None => db
            .port_indices()
            .filter(|&p| {
                let e = db.port(p);
                e.exists && e.known && (!db.is_switch(e.node) || e.num == 0)
            })
            .collect(),
    }
}

fn pkey_table_records(db: &Db, q: &Query<'_>, out: &mut Out) -> HResult {
    use pkey_table_record::comp;
    // Only a trusted requester may read P_Key tables (OpenSM answers ERR_REQ_INVALID).
    if !q.trusted {
        return Err(sa::ERR_REQ_INVALID);
    }
    let l = layout(Rec::PKeyTable);
    let tmpl = pkey_table_record::Repr::parse(q.rec).map_err(|_| sa::ERR_REQ_INVALID)?;
    let by_lid = (q.mask & comp::LID != 0).then_some(tmpl.lid);
    let mut buf = [0u8; pkey_table_record::LEN];
    for end in end_ports_for(db, by_lid) {
        let lid = db.lid_range(end).0;
        let port_q = (q.mask & comp::PORT_NUM != 0).then_some(tmpl.port_num);
        for p in table_ports(db, end, port_q) {
            if !db.share_pkey(q.req, p) {
                continue;
            }
            let Some(t) = db.pkey_table(p) else { continue };
            let nblocks = t.by_index.len().div_ceil(pkey_table::ENTRIES).max(1) as u16;
            let blocks = if q.mask & comp::BLOCK_NUM != 0 {
                if tmpl.block_num >= nblocks {
                    continue;
                }
                tmpl.block_num..=tmpl.block_num
            } else {
                0..=nblocks - 1
            };
            for b in blocks {
                if !out.open() {
                    return Ok(());
                }
                let start = b as usize * pkey_table::ENTRIES;
                let keys = t.by_index.get(start..).unwrap_or(&[]);
                let rec = pkey_table_record::Repr {
                    lid: Lid(lid),
                    block_num: b,
                    port_num: db.port(p).num,
                    p_key_table: pkey_table::Repr::from_keys(keys),
                };
                let skip = comp::LID | comp::BLOCK_NUM | comp::PORT_NUM;
                if rec.emit(&mut buf).is_ok() && l.matches(q.rec, &buf, q.mask, skip) {
                    out.push(&buf);
                }
            }
        }
    }
    Ok(())
}

fn sl2vl_records(db: &Db, q: &Query<'_>, out: &mut Out) -> HResult {
    use sl2vl_record::comp;
    let l = layout(Rec::SlToVl);
    let tmpl = sl2vl_record::Repr::parse(q.rec).map_err(|_| sa::ERR_REQ_INVALID)?;
    let by_lid = (q.mask & comp::LID != 0).then_some(tmpl.lid);
    let mut buf = [0u8; sl2vl_record::LEN];
    let table = |out_port: PortIdx, inp: u8| {
        db.sl2vl
            .get(&(out_port, inp))
            .copied()
            .unwrap_or_else(sl2vl::Repr::default)
    };
    for end in end_ports_for(db, by_lid) {
        let lid = Lid(db.lid_range(end).0);
        if !db.is_switch(db.port(end).node) {
            if !out.open() {
                return Ok(());
            }
            if db.share_pkey(q.req, end) {
                // OpenSM leaves both port numbers 0 on a CA.
                out.push_wire(&sl2vl_record::Repr {
                    lid,
                    input_port_num: 0,
                    output_port_num: 0,
                    sl_to_vl_mapping_table: table(end, 0),
                });
            }
            continue;
        }
        let outs = table_ports(
            db,
            end,
            (q.mask & comp::OUTPUT_PORT_NUM != 0).then_some(tmpl.output_port_num),
        );
        let ins = table_ports(
            db,
            end,
            (q.mask & comp::INPUT_PORT_NUM != 0).then_some(tmpl.input_port_num),
        );
        for &o in &outs {
            if !db.share_pkey(q.req, o) {
                continue;
            }
            for &i in &ins {
                if !out.open() {
                    return Ok(());
                }
                let rec = sl2vl_record::Repr {
                    lid,
                    input_port_num: db.port(i).num,
                    output_port_num: db.port(o).num,
                    sl_to_vl_mapping_table: table(o, db.port(i).num),
                };
                let skip = comp::LID | comp::INPUT_PORT_NUM | comp::OUTPUT_PORT_NUM;
                if rec.emit(&mut buf).is_ok() && l.matches(q.rec, &buf, q.mask, skip) {
                    out.push(&buf);
                }
            }
        }
    }
    Ok(())
}

fn vl_arb_records(db: &Db, q: &Query<'_>, out: &mut Out) -> HResult {
    use vl_arb_record::comp;
    let l = layout(Rec::VlArb);
    let tmpl = vl_arb_record::Repr::parse(q.rec).map_err(|_| sa::ERR_REQ_INVALID)?;
    let by_lid = (q.mask & comp::LID != 0).then_some(tmpl.lid);
    let mut buf = [0u8; vl_arb_record::LEN];
    for end in end_ports_for(db, by_lid) {
        let lid = Lid(db.lid_range(end).0);
        let port_q = (q.mask & comp::OUTPUT_PORT_NUM != 0).then_some(tmpl.output_port_num);
        for p in table_ports(db, end, port_q) {
            if !db.share_pkey(q.req, p) {
                continue;
            }
            for block in 1..=4u8 {
                if q.mask & comp::BLOCK_NUM != 0 && block != tmpl.block_num {
                    continue;
                }
                if !out.open() {
                    return Ok(());
                }
                let rec = vl_arb_record::Repr {
                    lid,
                    output_port_num: db.port(p).num,
                    block_num: block,
                    vl_arbitration_table: db
                        .vlarb
                        .get(&(p, block))
                        .copied()
                        .unwrap_or_else(vl_arb::Repr::default),
                };
                let skip = comp::LID | comp::OUTPUT_PORT_NUM | comp::BLOCK_NUM;
                if rec.emit(&mut buf).is_ok() && l.matches(q.rec, &buf, q.mask, skip) {
                    out.push(&buf);
                }
            }
        }
    }
    Ok(())
}

/// The SA's ClassPortInfo.
pub(crate) fn class_port_info(
    qos: bool,
    multipath: bool,
    mcast_top: bool,
    resp_time_value: u8,
) -> class_port_info::Repr {
    const QP1_QKEY: u32 = 0x8001_0000;
    // IsUDMulticastSupported, IsPortInfoCapMaskMatchSupported; IsMultiPathSupported.
    let mut cap = (1 << 9) | (1 << 13);
    if multipath {
        cap |= 1 << 10;
    }
    // IsFullPortInfoRecSupported, IsExtendedSpeedsSupported, IsPortInfoCapMask2Match,
    // IsSendOnlyFullMemberSupported, IsLinkWidth2x, IsLinkSpeedHDR; IsQoSSupported when QoS
    // tables are programmed; IsMulticastFDBTopSupported when the core sets it.
    let mut cap2 = (1 << 6) | (1 << 7) | (1 << 10) | (1 << 12) | (1 << 13) | (1 << 15);
    if qos {
        cap2 |= 1 << 1;
    }
    if mcast_top {
        cap2 |= 1 << 3;
    }
    class_port_info::Repr {
        base_version: 1,
        class_version: sa::CLASS_VERSION,
        capability_mask: cap,
        capability_mask2: cap2,
        resp_time_value,
        redirect_qp: 1,
        redirect_q_key: QP1_QKEY,
        trap_q_key: QP1_QKEY,
        ..class_port_info::Repr::default()
    }
}
