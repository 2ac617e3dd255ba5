//! Unit-test access to the captured exchanges in `tests/vectors` (format in the README there).

use crate::sa;

/// The MAD bytes of a vector file: every non-comment line as hex.
pub(crate) fn bytes(text: &str) -> Vec<u8> {
    let digits: Vec<u8> = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .flat_map(|l| l.bytes())
        .filter(u8::is_ascii_hexdigit)
        .map(|c| (c as char).to_digit(16).unwrap_or(0) as u8)
        .collect();
    digits.chunks(2).map(|p| (p[0] << 4) | p[1]).collect()
}

/// The value of `# expect: key=value`, if the file has one.
pub(crate) fn expect<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("# expect:"))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v)
}

/// An SA vector: its attribute offset and the records' bytes as OpenSM sent them (the vector
/// ends where OpenSM's answer ended).
pub(crate) fn sa_payload(text: &str) -> (u16, Vec<u8>) {
    let b = bytes(text);
    let offset = u16::from_be_bytes([b[44], b[45]]);
    (offset, b[sa::HEADER_LEN..].to_vec())
}

#[test]
fn loads_a_vector() {
    let text = include_str!("../tests/vectors/sa_linkrecord.resp.mad");
    let (offset, payload) = sa_payload(text);
    assert_eq!(offset, 1);
    assert_eq!(payload, [0, 4, 1, 1, 0, 3, 0, 0]);
    assert_eq!(expect(text, "to_lid"), Some("3"));
    assert_eq!(expect(text, "nothing"), None);
}

/// The property every record keeps: any `R::LEN` bytes parse, emit sets no bit the input
/// lacked (it only clears reserved ones), and the emitted bytes parse back the same. Returns
/// what emit wrote, for the caller's reserved-bit check.
pub(crate) fn any_bytes<R: crate::Wire + PartialEq + core::fmt::Debug>(
    b: &[u8],
) -> Result<Vec<u8>, proptest::test_runner::TestCaseError> {
    let r = R::parse(b).map_err(|e| proptest::test_runner::TestCaseError::fail(e.to_string()))?;
    let mut out = vec![0xa5u8; R::LEN];
    r.emit(&mut out)
        .map_err(|e| proptest::test_runner::TestCaseError::fail(e.to_string()))?;
    for (o, i) in out.iter().zip(b) {
        proptest::prop_assert_eq!(o & !i, 0);
    }
    proptest::prop_assert_eq!(R::parse(&out).ok(), Some(r));
    Ok(out)
}
