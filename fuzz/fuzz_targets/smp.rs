#![no_main]
//! SMP parse never panics, and what parses re-emits to the same bytes.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = sm_mad::smp::Repr::parse(data) {
        let mut out = [0u8; 256];
        if r.emit(&mut out).is_ok() {
            let again = sm_mad::smp::Repr::parse(&out).expect("emitted SMP parses");
            assert_eq!(again, r);
        }
    }
});
