//! The topology reader never panics, whatever it is fed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use proptest::prelude::*;
use sm_core::read_topology_str;

fn line() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "(Switch|Hca|Ca|Rt)[ \t]{0,2}[0-9]{1,4}[ \t]\"[a-c]{1,2}\"( # \"[a-z ]{0,6}\"( (base|enhanced) port 0)?( lid [0-9]{1,6})?( lmc [0-9]{1,3})?)?",
        "\\[[0-9]{1,4}\\](\\([0-9a-f]{1,17}\\))?[ \t]\"[a-c]{1,2}\"(\\[[0-9]{1,4}\\])?( [wse]=[0-9x]{1,4})?( # (lid [0-9]{1,5} lmc [0-9] )?\"[a-z]{0,4}\" lid [0-9]{1,5} [0-9]{1,2}x[A-Z0-9]{1,5})?",
        "(switchguid|caguid|rtguid|sysimgguid|vendid|devid|width|speed|extspeed)[=+](0x)?[0-9a-f]{0,18}",
        "(do|include|module|pdebug)[ a-z\"=]{0,8}",
        "#.{0,10}",
        ".{0,30}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn structured_input_never_panics(lines in proptest::collection::vec(line(), 0..30)) {
        let text = lines.join("\n");
        let _ = read_topology_str(&text, Path::new("fuzz.net"));
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let text = String::from_utf8_lossy(&bytes);
        let _ = read_topology_str(&text, Path::new("fuzz.net"));
    }
}
