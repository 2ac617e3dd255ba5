#![no_main]
//! SMPs from arbitrary bytes (checks in src/lib.rs), then the attribute their header names,
//! decoded from their data field with the same checks.

use libfuzzer_sys::fuzz_target;
use sm_mad::{attr, smp};
use sm_mad_fuzz::roundtrip;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = roundtrip!(sm_mad::smp, view, data) else {
        return;
    };
    let d = &s.data.0[..];
    match s.attr_id {
        attr::NODE_DESCRIPTION => {
            let _ = roundtrip!(sm_mad::node_description, none, d);
        }
        attr::NODE_INFO => {
            let _ = roundtrip!(sm_mad::node_info, view, d);
        }
        attr::SWITCH_INFO => {
            let _ = roundtrip!(sm_mad::switch_info, view, d);
        }
        attr::GUID_INFO => {
            let _ = roundtrip!(sm_mad::guid_info, none, d);
        }
        attr::PORT_INFO => {
            let _ = roundtrip!(sm_mad::port_info, view, d);
        }
        attr::P_KEY_TABLE => {
            let _ = roundtrip!(sm_mad::pkey_table, none, d);
        }
        attr::SL_TO_VL_MAPPING_TABLE => {
            let _ = roundtrip!(sm_mad::sl2vl, none, d);
        }
        attr::VL_ARBITRATION_TABLE => {
            let _ = roundtrip!(sm_mad::vl_arb, view, d);
        }
        attr::LINEAR_FORWARDING_TABLE => {
            let _ = roundtrip!(sm_mad::lft, none, d);
        }
        attr::MULTICAST_FORWARDING_TABLE => {
            let _ = roundtrip!(sm_mad::mft, none, d);
        }
        attr::SM_INFO => {
            let _ = roundtrip!(sm_mad::sm_info, view, d);
        }
        attr::NOTICE => {
            let _ = roundtrip!(sm_mad::notice, view, d);
        }
        _ => {}
    }
    // Turning a request into its response in place keeps it parseable.
    let mut b = [0u8; smp::LEN];
    b.copy_from_slice(&data[..smp::LEN]);
    smp::set_direction(&mut b, true).expect("a whole SMP");
    smp::Repr::parse(&b).expect("only the D bit changed");
});
