//! The bytes of a captured vector (`tests/vectors/NAME.mad`, format in the README there),
//! for tests and benches that need real MADs but not the vector's metadata.

#![allow(dead_code)]

use std::path::Path;

/// The MAD of vector `name` (e.g. `dr_portinfo_hca_local.resp`), zero-padded to 256 bytes
/// (SA answers were captured as short as OpenSM sent them).
pub(crate) fn mad(name: &str) -> [u8; 256] {
    let b = bytes(name);
    let mut out = [0u8; 256];
    out[..b.len()].copy_from_slice(&b);
    out
}

/// The hex of vector `name`, as captured.
pub(crate) fn bytes(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/vectors")
        .join(format!("{name}.mad"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    hex(&text)
}

/// The hex digits of every line that is not a `#` comment, as bytes.
pub(crate) fn hex(text: &str) -> Vec<u8> {
    let digits: Vec<u8> = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .flat_map(|l| l.bytes())
        .filter(u8::is_ascii_hexdigit)
        .map(|c| (c as char).to_digit(16).unwrap_or(0) as u8)
        .collect();
    digits.chunks_exact(2).map(|p| (p[0] << 4) | p[1]).collect()
}
