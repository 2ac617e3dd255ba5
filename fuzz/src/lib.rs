//! What every fuzz target checks of the parser it feeds (see `README.md`).
//!
//! `roundtrip!(module, reserved, bytes)` takes a structure module of `sm_mad` (one with
//! `Repr::parse`, `Repr::buffer_len` and `Repr::emit`):
//!
//! - `parse` never panics, whatever the bytes;
//! - what parses emits, without writing past `buffer_len`, to bytes that parse back to the
//!   same structure and emit again to the same bytes;
//! - with `view`, when the module's `Packet::check_reserved` accepts the input, emit gives
//!   the input back byte for byte (`none`: the structure has no reserved bits and must
//!   always do so; `loose`: no such promise, e.g. MultiPathRecord's unused GID slots).

/// A whole fuzz target for one structure module: `roundtrip_target!(sm_mad::lft, none);`.
#[macro_export]
macro_rules! roundtrip_target {
    ($($m:ident)::+, $reserved:ident) => {
        libfuzzer_sys::fuzz_target!(|data: &[u8]| {
            let _ = $crate::roundtrip!($($m)::+, $reserved, data);
        });
    };
}

/// The checks on one input; evaluates to the parsed structure, if any.
#[macro_export]
macro_rules! roundtrip {
    ($($m:ident)::+, $reserved:ident, $data:expr) => {{
        let data: &[u8] = $data;
        let parsed = $($m)::+::Repr::parse(data);
        if let Ok(r) = &parsed {
            let n = r.buffer_len();
            let mut out = [0xa5u8; 512];
            r.emit(&mut out).expect("a parsed structure emits");
            assert!(out[n..].iter().all(|&b| b == 0xa5), "emit wrote past buffer_len");
            let again = $($m)::+::Repr::parse(&out[..n]).expect("emitted bytes parse");
            assert_eq!(&again, r, "parse -> emit -> parse changed the structure");
            let mut out2 = [0x5au8; 512];
            again.emit(&mut out2).expect("a parsed structure emits");
            assert_eq!(out[..n], out2[..n], "emit is not stable");
            if $crate::reserved_clear!($($m)::+, $reserved, data) {
                let m = n.min(data.len());
                assert_eq!(out[..m], data[..m], "clean input did not re-emit exactly");
            }
        }
        parsed
    }};
}

/// Whether `data` has no reserved bit set, as far as the structure promises exactness.
#[macro_export]
macro_rules! reserved_clear {
    ($($m:ident)::+, view, $data:expr) => {
        $($m)::+::Packet::new_checked($data).and_then(|p| p.check_reserved()).is_ok()
    };
    ($($m:ident)::+, none, $data:expr) => {
        true
    };
    ($($m:ident)::+, loose, $data:expr) => {
        false
    };
}
