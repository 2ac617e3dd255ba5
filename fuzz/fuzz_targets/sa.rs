#![no_main]
//! SA MADs from arbitrary bytes (checks in src/lib.rs), then the records their data holds,
//! walked by attribute offset and each checked the same way.

use libfuzzer_sys::fuzz_target;
use sm_mad::sa;
use sm_mad_fuzz::roundtrip;

/// Each record slice of the payload through `roundtrip!`.
macro_rules! walk {
    ($m:ident, $reserved:ident, $payload:expr, $offset:expr) => {
        if let Ok(slices) = sa::record_slices(
            "record",
            $payload,
            $offset,
            <sm_mad::$m::Repr as sm_mad::Wire>::LEN,
        ) {
            for rec in slices {
                let _ = roundtrip!(sm_mad::$m, $reserved, rec);
            }
        }
    };
}

fuzz_target!(|data: &[u8]| {
    let Ok(m) = roundtrip!(sm_mad::sa, view, data) else {
        return;
    };
    let (payload, offset) = (m.payload(), m.attribute_offset);
    match m.attr_id {
        sm_mad::attr::CLASS_PORT_INFO => walk!(class_port_info, view, payload, offset),
        // A Report carries one Notice, IssuerGID included.
        sm_mad::attr::NOTICE => {
            let _ = roundtrip!(sm_mad::notice, view, payload);
        }
        sm_mad::attr::INFORM_INFO => walk!(inform_info, view, payload, offset),
        sm_mad::path_record::ATTR_ID => walk!(path_record, view, payload, offset),
        sm_mad::multipath_record::ATTR_ID => walk!(multipath_record, loose, payload, offset),
        sm_mad::mcmember_record::ATTR_ID => walk!(mcmember_record, view, payload, offset),
        sm_mad::service_record::ATTR_ID => walk!(service_record, view, payload, offset),
        sm_mad::inform_info_record::ATTR_ID => {
            walk!(inform_info_record, view, payload, offset)
        }
        sm_mad::node_record::ATTR_ID => walk!(node_record, view, payload, offset),
        sm_mad::port_info_record::ATTR_ID => walk!(port_info_record, view, payload, offset),
        sm_mad::link_record::ATTR_ID => walk!(link_record, view, payload, offset),
        sm_mad::switch_info_record::ATTR_ID => walk!(switch_info_record, view, payload, offset),
        sm_mad::lft_record::ATTR_ID => walk!(lft_record, view, payload, offset),
        sm_mad::mft_record::ATTR_ID => walk!(mft_record, view, payload, offset),
        sm_mad::pkey_table_record::ATTR_ID => walk!(pkey_table_record, view, payload, offset),
        sm_mad::sl2vl_record::ATTR_ID => walk!(sl2vl_record, view, payload, offset),
        sm_mad::vl_arb_record::ATTR_ID => walk!(vl_arb_record, view, payload, offset),
        sm_mad::sm_info_record::ATTR_ID => walk!(sm_info_record, view, payload, offset),
        sm_mad::guid_info_record::ATTR_ID => walk!(guid_info_record, view, payload, offset),
        _ => {}
    }
});
