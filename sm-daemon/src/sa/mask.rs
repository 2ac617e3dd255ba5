//! Component masks (IBA 15.2.4): bit *i* of a query's ComponentMask selects the *i*-th
//! component of the record, in the order of the specification's table, reserved fields
//! included. A record matches when every selected component equals the template's.
//!
//! Each record's components are laid out here as (bit offset, bit width) from the sm-mad
//! field tables: the record's own fields, the fields of the attribute it embeds (NodeInfo,
//! PortInfo, SwitchInfo, SMInfo) or the attribute as one component (tables), and every gap
//! between them as a reserved component. Records whose specification splits a gap or a
//! table differently (GUIDInfoRecord) are written out by hand. The unit tests check the
//! positions against the `comp` constants of each sm-mad record module.

use std::sync::OnceLock;

use sm_mad::{
    lft_record, link_record, mcmember_record, mft_record, multipath_record, node_info, node_record,
    path_record, pkey_table_record, port_info, port_info_record, sl2vl_record, sm_info,
    sm_info_record, switch_info, switch_info_record, vl_arb_record,
};

/// One component: bit offset and width within the record.
pub(crate) type Comp = (u16, u16);

/// The components of one record.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    pub(crate) comps: Vec<Comp>,
}

impl Layout {
    /// Mask bits that name no component of this record.
    pub(crate) fn unknown_bits(&self, mask: u64) -> u64 {
        match self.comps.len() {
            n if n >= 64 => 0,
            n => mask & !((1u64 << n) - 1),
        }
    }

    /// Whether `cand` has every component `mask` selects (outside `skip`) equal to `query`.
    /// Both buffers hold at least the record (shorter ones compare as unequal).
    pub(crate) fn matches(&self, query: &[u8], cand: &[u8], mask: u64, skip: u64) -> bool {
        let mut m = mask & !skip;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            let Some(&(off, width)) = self.comps.get(i) else {
                continue;
            };
            if !bits_eq(query, cand, off as usize, width as usize) {
                return false;
            }
        }
        true
    }
}

/// Bits `off .. off + width` (spec numbering: bit 0 is the MSB of byte 0) are equal.
pub(crate) fn bits_eq(a: &[u8], b: &[u8], off: usize, width: usize) -> bool {
    if width == 0 {
        return true;
    }
    let first = off / 8;
    let last = (off + width - 1) / 8;
    let (Some(a), Some(b)) = (a.get(first..=last), b.get(first..=last)) else {
        return false;
    };
    let n = a.len();
    for i in 0..n {
        let mut m = 0xFFu8;
        if i == 0 {
            m &= 0xFF >> (off % 8);
        }
        if i == n - 1 {
            let end = (off + width) % 8;
            if end != 0 {
                m &= !(0xFFu8 >> end);
            }
        }
        if (a[i] ^ b[i]) & m != 0 {
            return false;
        }
    }
    true
}

/// Fields at `base` (bits) from a field table, plus whole attributes.
type Part<'a> = (usize, &'a [(&'static str, usize, usize)]);

/// Components from field tables placed at their bases; gaps up to `end` bits become
/// reserved components (a gap at the very end is padding, not a component).
fn build(parts: &[Part<'_>], skip: &[&str], end: usize) -> Layout {
    let mut fields: Vec<(usize, usize)> = parts
        .iter()
        .flat_map(|(base, table)| {
            table
                .iter()
                .filter(|(name, _, _)| !skip.contains(name))
                .map(move |&(_, off, w)| (base + off, w))
        })
        .collect();
    fields.sort_unstable();
    let mut comps = Vec::new();
    let mut at = 0usize;
    for (off, w) in fields {
        if off > at {
            comps.push((at as u16, (off - at) as u16));
        }
        comps.push((off as u16, w as u16));
        at = off + w;
    }
    debug_assert!(at <= end);
    Layout { comps }
}

/// The record kinds with a component layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rec {
    Node,
    PortInfo,
    SlToVl,
    SwitchInfo,
    Lft,
    Mft,
    SmInfo,
    Link,
    GuidInfo,
    PKeyTable,
    Path,
    VlArb,
    MultiPath,
    McMember,
    Service,
    InformInfoRecord,
}

struct Layouts {
    node: Layout,
    port_info: Layout,
    sl2vl: Layout,
    switch_info: Layout,
    lft: Layout,
    mft: Layout,
    sm_info: Layout,
    link: Layout,
    guid_info: Layout,
    pkey: Layout,
    path: Layout,
    vlarb: Layout,
    multipath: Layout,
    mcmember: Layout,
    service: Layout,
    inform_info_record: Layout,
}

fn layouts() -> &'static Layouts {
    static L: OnceLock<Layouts> = OnceLock::new();
    L.get_or_init(|| {
        let whole = |name: &'static str, bytes: usize| vec![(name, 0usize, bytes * 8)];
        let node_desc = whole("description", 64);
        let table64 = whole("table", 64);
        let sl2vl = whole("sl_to_vl", 8);
        // The 64-bit ServiceID replaced two reserved words: it is two components.
        let path: Vec<(&'static str, usize, usize)> = path_record::field::ALL
            .iter()
            .flat_map(|&(n, o, w)| {
                if n == "service_id" {
                    vec![(n, 0, 32), (n, 32, 32)]
                } else {
                    vec![(n, o, w)]
                }
            })
            .collect();
        // The XDR speed fields took bits of a reserved byte, which stays one component
        // (the numbering clients use).
        let mut port_info_comps: Vec<(&'static str, usize, usize)> = port_info::field::ALL
            .iter()
            .copied()
            .filter(|&(_, o, _)| !(448..456).contains(&o))
            .chain([("reserved_448", 448, 8)])
            .collect();
        port_info_comps.sort_by_key(|&(_, o, _)| o);
        Layouts {
            node: build(
                &[
                    (0, node_record::field::ALL),
                    (32, node_info::field::ALL),
                    (352, &node_desc),
                ],
                &["node_info", "node_description"],
                node_record::LEN * 8,
            ),
            port_info: build(
                &[(0, port_info_record::field::ALL), (32, &port_info_comps)],
                &["port_info"],
                port_info_record::LEN * 8,
            ),
            sl2vl: build(
                &[(0, sl2vl_record::field::ALL), (64, &sl2vl)],
                &["sl_to_vl_mapping_table"],
                sl2vl_record::LEN * 8,
            ),
            switch_info: build(
                &[
                    (0, switch_info_record::field::ALL),
                    (32, switch_info::field::ALL),
                ],
                &["switch_info"],
                switch_info_record::LEN * 8,
            ),
            lft: build(
                &[(0, lft_record::field::ALL), (64, &table64)],
                &["linear_forwarding_table"],
                lft_record::LEN * 8,
            ),
            mft: build(
                &[(0, mft_record::field::ALL), (64, &table64)],
                &["multicast_forwarding_table"],
                mft_record::LEN * 8,
            ),
            sm_info: build(
                &[(0, sm_info_record::field::ALL), (32, sm_info::field::ALL)],
                &["sm_info"],
                sm_info_record::LEN * 8,
            ),
            link: build(&[(0, link_record::field::ALL)], &[], link_record::LEN * 8),
            // LID, BlockNum, two reserved fields (8 and 32 bits), eight GUIDs.
            guid_info: Layout {
                comps: [(0, 16), (16, 8), (24, 8), (32, 32)]
                    .into_iter()
                    .chain((0..8).map(|i| (64 + 64 * i, 64)))
                    .collect(),
            },
            pkey: build(
                &[(0, pkey_table_record::field::ALL), (64, &table64)],
                &["p_key_table"],
                pkey_table_record::LEN * 8,
            ),
            path: build(&[(0, &path)], &[], path_record::LEN * 8),
            vlarb: build(
                &[(0, vl_arb_record::field::ALL), (64, &table64)],
                &["vl_arbitration_table"],
                vl_arb_record::LEN * 8,
            ),
            multipath: build(
                &[(0, multipath_record::field::ALL)],
                &[],
                multipath_record::HEADER_LEN * 8,
            ),
            mcmember: build(
                &[(0, mcmember_record::field::ALL)],
                &[],
                mcmember_record::LEN * 8,
            ),
            // Every ServiceData entry is a component of its own.
            service: Layout {
                comps: [
                    (0, 64),
                    (64, 128),
                    (192, 16),
                    (208, 16),
                    (224, 32),
                    (256, 128),
                ]
                .into_iter()
                .chain([(384, 512)])
                .chain((0..16).map(|i| (896 + 8 * i, 8)))
                .chain((0..8).map(|i| (1024 + 16 * i, 16)))
                .chain((0..4).map(|i| (1152 + 32 * i, 32)))
                .chain((0..2).map(|i| (1280 + 64 * i, 64)))
                .collect(),
            },
            // SubscriberGID, Enum, reserved, then InformInfo's fields (at bit 192) with its
            // reserved gaps, as the specification numbers the components.
            inform_info_record: Layout {
                comps: vec![
                    (0, 128),
                    (128, 16),
                    (144, 48),
                    (192, 128),
                    (320, 16),
                    (336, 16),
                    (352, 16),
                    (368, 8),
                    (376, 8),
                    (384, 16),
                    (400, 16),
                    (416, 24),
                    (440, 3),
                    (443, 5),
                    (448, 8),
                    (456, 24),
                ],
            },
        }
    })
}

/// The layout of a record kind.
pub(crate) fn layout(r: Rec) -> &'static Layout {
    let l = layouts();
    match r {
        Rec::Node => &l.node,
        Rec::PortInfo => &l.port_info,
        Rec::SlToVl => &l.sl2vl,
        Rec::SwitchInfo => &l.switch_info,
        Rec::Lft => &l.lft,
        Rec::Mft => &l.mft,
        Rec::SmInfo => &l.sm_info,
        Rec::Link => &l.link,
        Rec::GuidInfo => &l.guid_info,
        Rec::PKeyTable => &l.pkey,
        Rec::Path => &l.path,
        Rec::VlArb => &l.vlarb,
        Rec::MultiPath => &l.multipath,
        Rec::McMember => &l.mcmember,
        Rec::Service => &l.service,
        Rec::InformInfoRecord => &l.inform_info_record,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The component a `comp` constant names starts at `off` with `width` bits.
    fn at(r: Rec, bit: u64, off: usize, width: usize) {
        let i = bit.trailing_zeros() as usize;
        assert_eq!(
            layout(r).comps.get(i),
            Some(&(off as u16, width as u16)),
            "{r:?} component {i}"
        );
    }

    #[test]
    fn positions_agree_with_the_comp_constants() {
        use sm_mad::{
            guid_info_record as g, lft_record as l, link_record as lr, mft_record as m,
            multipath_record as mp, node_record as n, path_record as pr, pkey_table_record as pk,
            port_info_record as pi, sl2vl_record as s, sm_info_record as si,
            switch_info_record as sw, vl_arb_record as v,
        };
        at(Rec::Node, n::comp::LID, 0, 16);
        at(Rec::Node, 1 << 1, 16, 16);
        at(Rec::Node, n::comp::NODE_GUID, 128, 64);
        at(Rec::Node, n::comp::PORT_GUID, 192, 64);
        at(Rec::Node, n::comp::LOCAL_PORT_NUM, 320, 8);
        at(Rec::Node, n::comp::VENDOR_ID, 328, 24);
        at(Rec::Node, n::comp::NODE_DESCRIPTION, 352, 512);
        assert_eq!(layout(Rec::Node).comps.len(), 15);

        at(Rec::PortInfo, pi::comp::ENDPORT_LID, 0, 16);
        at(Rec::PortInfo, pi::comp::OPTIONS, 24, 8);
        at(Rec::PortInfo, pi::comp::M_KEY, 32, 64);
        at(Rec::PortInfo, pi::comp::LID, 32 + 128, 16);
        at(Rec::PortInfo, pi::comp::CAPABILITY_MASK, 32 + 160, 32);
        at(Rec::PortInfo, pi::comp::LMC, 32 + 277, 3);
        at(Rec::PortInfo, pi::comp::MTU_CAP, 32 + 332, 4);
        at(Rec::PortInfo, pi::comp::RESP_TIME_VALUE, 32 + 419, 5);
        at(
            Rec::PortInfo,
            pi::comp::LINK_ROUND_TRIP_LATENCY,
            32 + 456,
            24,
        );
        at(Rec::PortInfo, pi::comp::LINK_SPEED_EXT_ENABLED, 32 + 507, 5);
        assert_eq!(layout(Rec::PortInfo).comps.len(), 58);

        at(Rec::SwitchInfo, sw::comp::LID, 0, 16);
        at(Rec::SwitchInfo, sw::comp::LINEAR_FDB_TOP, 32 + 48, 16);
        at(Rec::SwitchInfo, sw::comp::ENHANCED_PORT0, 32 + 132, 1);
        at(Rec::SwitchInfo, sw::comp::MULTICAST_FDB_TOP, 32 + 144, 16);

        at(Rec::SmInfo, si::comp::GUID, 32, 64);
        at(Rec::SmInfo, si::comp::SM_STATE, 32 + 164, 4);

        at(Rec::Link, lr::comp::TO_LID, 32, 16);
        at(Rec::Lft, l::comp::BLOCK_NUM, 16, 16);
        at(Rec::Lft, 1 << 3, 64, 512);
        at(Rec::Mft, m::comp::POSITION, 16, 4);
        at(Rec::Mft, m::comp::BLOCK_NUM, 23, 9);
        at(Rec::Mft, 1 << 5, 64, 512);
        at(Rec::PKeyTable, pk::comp::PORT_NUM, 32, 8);
        at(Rec::PKeyTable, 1 << 4, 64, 512);
        at(Rec::SlToVl, s::comp::OUTPUT_PORT_NUM, 24, 8);
        at(Rec::SlToVl, 1 << 4, 64, 64);
        at(Rec::VlArb, v::comp::BLOCK_NUM, 24, 8);
        at(Rec::VlArb, 1 << 4, 64, 512);
        at(Rec::GuidInfo, g::comp::GUID0, 64, 64);
        at(Rec::GuidInfo, g::comp::GUID7, 512, 64);

        at(Rec::Path, pr::comp::DGID, 64, 128);
        at(Rec::Path, pr::comp::SLID, 336, 16);
        at(Rec::Path, pr::comp::FLOW_LABEL, 356, 20);
        at(Rec::Path, pr::comp::NUMB_PATH, 393, 7);
        at(Rec::Path, pr::comp::SL, 428, 4);
        at(Rec::Path, pr::comp::PREFERENCE, 456, 8);
        at(Rec::MultiPath, mp::comp::FLOW_LABEL, 4, 20);
        at(Rec::MultiPath, mp::comp::SGID_COUNT, 120, 8);
        at(Rec::MultiPath, mp::comp::SERVICE_ID_56LSB, 136, 56);

        use sm_mad::{inform_info_record as ii, mcmember_record as mc, service_record as sr};
        at(Rec::McMember, mc::comp::PORT_GID, 128, 128);
        at(Rec::McMember, mc::comp::MTU, 306, 6);
        at(Rec::McMember, mc::comp::FLOW_LABEL, 356, 20);
        at(Rec::McMember, mc::comp::PROXY_JOIN, 392, 1);
        assert_eq!(layout(Rec::McMember).comps.len(), 18);
        at(Rec::Service, sr::comp::SERVICE_P_KEY, 192, 16);
        at(Rec::Service, sr::comp::SERVICE_LEASE, 224, 32);
        at(Rec::Service, sr::comp::SERVICE_NAME, 384, 512);
        at(Rec::Service, sr::comp::service_data8(15), 896 + 120, 8);
        at(Rec::Service, sr::comp::service_data16(0), 1024, 16);
        at(Rec::Service, sr::comp::service_data32(3), 1152 + 96, 32);
        at(Rec::Service, sr::comp::service_data64(1), 1344, 64);
        assert_eq!(layout(Rec::Service).comps.len(), 37);
        at(Rec::InformInfoRecord, ii::comp::ENUM, 128, 16);
        at(Rec::InformInfoRecord, ii::comp::GID, 192, 128);
        at(Rec::InformInfoRecord, ii::comp::IS_GENERIC, 368, 8);
        at(Rec::InformInfoRecord, ii::comp::TRAP_NUMBER, 400, 16);
        at(Rec::InformInfoRecord, ii::comp::RESP_TIME_VALUE, 443, 5);
        at(Rec::InformInfoRecord, ii::comp::PRODUCER_TYPE, 456, 24);
    }

    #[test]
    fn bit_ranges() {
        let a = [0b1010_1100u8, 0xff];
        let b = [0b1010_0011u8, 0xfe];
        assert!(bits_eq(&a, &b, 0, 4));
        assert!(!bits_eq(&a, &b, 0, 5));
        assert!(bits_eq(&a, &b, 8, 7));
        assert!(!bits_eq(&a, &b, 8, 8));
        assert!(!bits_eq(&a, &b[..1], 8, 1), "short buffers never match");
        let l = layout(Rec::Link);
        assert_eq!(l.unknown_bits(0b1_1111), 0b1_0000);
        // FromPort (byte 2) differs.
        assert!(l.matches(&[0, 1, 2, 3, 0, 5], &[0, 1, 9, 3, 0, 5], 0b1101, 0));
        assert!(!l.matches(&[0, 1, 2, 3, 0, 5], &[0, 1, 9, 3, 0, 5], 0b0010, 0));
        assert!(l.matches(&[0, 1, 2, 3, 0, 5], &[0, 1, 9, 3, 0, 5], 0b0010, 0b0010));
    }
}
