//! The dissector on every captured MAD: it decodes each one, and what it shows agrees with
//! the typed codec.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use sm_mad::Method;
use sm_mad::decode::{Body, decode};

fn vectors() -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors");
    let mut v = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "mad") {
            let text = std::fs::read_to_string(&p).unwrap();
            let hex: String = text
                .lines()
                .filter(|l| !l.starts_with('#'))
                .flat_map(|l| l.chars())
                .filter(char::is_ascii_hexdigit)
                .collect();
            let bytes = (0..hex.len() / 2)
                .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
                .collect();
            v.push((p.file_name().unwrap().to_string_lossy().into_owned(), bytes));
        }
    }
    v.sort();
    assert!(
        v.len() >= 100,
        "expected the captured vectors, found {}",
        v.len()
    );
    v
}

#[test]
fn every_vector_decodes_without_complaint() {
    for (name, bytes) in vectors() {
        let d = decode(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(d.attribute_name.is_some(), "{name}: attribute has no name");
        let complaints: Vec<_> = d
            .notes
            .iter()
            .filter(|n| !n.contains("RMPP transfer"))
            .collect();
        assert!(complaints.is_empty(), "{name}: {complaints:?}");
        let is_smp = bytes[1] == 0x01 || bytes[1] == 0x81;
        if is_smp {
            assert!(d.smp.is_some(), "{name}");
            // Get requests carry no data; everything else carries exactly one attribute.
            let want = usize::from(d.mad.method != Method::Get);
            assert_eq!(d.records.len(), want, "{name}");
        } else {
            assert!(d.sa.is_some(), "{name}");
        }
        // JSON always serialises.
        serde_json::to_string(&d).unwrap();
    }
}

#[test]
fn decoded_smp_attribute_equals_the_typed_parse() {
    for (name, bytes) in vectors() {
        if !(name.ends_with(".resp.mad") && (bytes[1] == 0x01 || bytes[1] == 0x81)) {
            continue;
        }
        let smp = sm_mad::smp::Repr::parse(&bytes).unwrap();
        let d = decode(&bytes).unwrap();
        match &d.records[0] {
            Body::PortInfo(p) => {
                assert_eq!(*p, smp.attribute::<sm_mad::port_info::Repr>().unwrap())
            }
            Body::NodeInfo(n) => {
                assert_eq!(*n, smp.attribute::<sm_mad::node_info::Repr>().unwrap())
            }
            Body::Raw { .. } => panic!("{name}: not decoded"),
            _ => {}
        }
    }
}

#[test]
fn sa_table_answers_list_their_records() {
    let v = vectors();
    let (_, link) = v
        .iter()
        .find(|(n, _)| n == "sa_linkrecord.resp.mad")
        .expect("sa_linkrecord vector");
    let d = decode(link).unwrap();
    assert!(!d.records.is_empty());
    let (_, pr) = v
        .iter()
        .find(|(n, _)| n == "sa_pathrecord.resp.mad")
        .unwrap();
    let d = decode(pr).unwrap();
    assert_eq!(d.records.len(), 1);
    assert!(matches!(d.records[0], Body::PathRecord(_)));
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    assert!(decode(&[]).is_err());
    assert!(decode(&[2; 256]).is_err());
    let mut smp = vec![0u8; 256];
    smp[..4].copy_from_slice(&[1, 0x81, 1, 0x81]);
    smp[7] = 64;
    assert!(decode(&smp).is_err());
    // Unknown class: header only, with a note.
    let mut other = vec![0u8; 256];
    other[..3].copy_from_slice(&[1, 0x30, 1]);
    let d = decode(&other).unwrap();
    assert_eq!(d.notes.len(), 1);
}
