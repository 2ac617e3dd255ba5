#![no_main]
//! `Guid`'s text parser on arbitrary text: it must never panic, and a GUID it accepts must
//! read back the same from its `Display` form.

use libfuzzer_sys::fuzz_target;
use sm_mad::Guid;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(g) = text.parse::<Guid>() {
        assert_eq!(g.to_string().parse::<Guid>(), Ok(g));
    }
});
