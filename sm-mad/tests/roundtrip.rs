//! Properties of every wire structure of the codec, from one list (`subjects!` below):
//!
//! - (a) any bytes, short ones included, parse or fail with a typed error; never a panic;
//! - (b) parse -> emit -> parse gives the same structure, and once the bits the structure's
//!   own `check_reserved` reports are cleared, emit gives back the input byte for byte (and
//!   clearing them did not change what parsed);
//! - (c) a structure built from arbitrary field values either fails to emit with a typed
//!   error or emits bytes that parse back to it, each field cut to its wire width.
//!
//! Then the layers: every SMP attribute inside an SMP, every SA record in SA data.
//!
//! Modules with their own proptests keep them and are not repeated here: guid_info,
//! pkey_table, sl2vl and vl_arb check (b) on every input (their entries say `in_module`),
//! the table modifiers round-trip in pkey_table, sl2vl, vl_arb and mft, and the RMPP
//! sender and receiver run over arbitrary sizes, faults and headers in `rmpp`'s transfer tests.
//!
//! Adding a structure is one line in `subjects!` (and one in `smp_attributes!` or
//! `sa_records!`); a hand-written Repr also needs
//! `#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use arbitrary::{Arbitrary, Unstructured};
use proptest::prelude::*;
use sm_mad::notice::{self, Kind, Trap};
use sm_mad::{
    Error, Result, SmpAttribute, Wire, WireValue, class_port_info, guid_info, guid_info_record,
    inform_info, inform_info_record, lft, lft_record, link_record, mad, mcmember_record, mft,
    mft_record, multipath_record, node_description, node_info, node_record, path_record,
    pkey_table, pkey_table_record, port_info, port_info_record, rmpp, sa, service_record, sl2vl,
    sl2vl_record, sm_info, sm_info_record, smp, switch_info, switch_info_record, vl_arb,
    vl_arb_record,
};

/// Scratch buffers: larger than any structure, so `emit` never runs out of room.
const BUF: usize = 512;

/// A wire structure as the properties see it.
trait Subject: Sized + Copy + PartialEq + core::fmt::Debug + for<'a> Arbitrary<'a> {
    /// Bytes of a whole structure.
    const LEN: usize;
    fn parse(buf: &[u8]) -> Result<Self>;
    fn emit(&self, buf: &mut [u8]) -> Result<()>;
    fn buffer_len(&self) -> usize;
    /// The structure's strict check: the first reserved bit set, with its offset from the
    /// start of `buf`.
    fn check_reserved(buf: &[u8]) -> Result<()>;
    /// What `parse` must return after `emit` of `self`.
    fn canon(&self) -> Result<Self>;
    /// Makes random bytes more likely to parse (valid versions, small counts).
    fn fix(buf: &mut [u8]);
}

/// Clears every bit `T::check_reserved` reports, one report at a time. False if the check
/// fails for another reason (a buffer too short for the view).
fn clear_reserved<T: Subject>(buf: &mut [u8]) -> core::result::Result<bool, TestCaseError> {
    for _ in 0..=buf.len() * 8 {
        match T::check_reserved(buf) {
            Ok(()) => return Ok(true),
            Err(Error::ReservedBitsSet { offset, mask, .. }) => match buf.get_mut(offset) {
                // Each report names at least one set bit, so this ends.
                Some(b) if *b & mask == mask && mask != 0 => *b &= !mask,
                _ => {
                    return Err(TestCaseError::fail(format!(
                        "check_reserved reported byte {offset} mask {mask:#x} wrongly"
                    )));
                }
            },
            Err(_) => return Ok(false),
        }
    }
    Err(TestCaseError::fail("check_reserved kept reporting bits"))
}

/// (a): parse any bytes; a truncation error states the real length.
fn any_bytes<T: Subject>(input: &[u8]) -> core::result::Result<(), TestCaseError> {
    let mut b = input.to_vec();
    for buf in [input, {
        T::fix(&mut b);
        &b
    }] {
        if let Err(Error::Truncated { need, got, .. }) = T::parse(buf) {
            prop_assert_eq!(got, buf.len());
            prop_assert!(need > got);
        }
        let _ = T::check_reserved(buf);
    }
    Ok(())
}

/// (b): parse -> emit -> parse, and exact emit of input with its reserved bits clear.
fn reparse<T: Subject>(input: &[u8]) -> core::result::Result<(), TestCaseError> {
    let mut b = input.to_vec();
    T::fix(&mut b);
    let Ok(r) = T::parse(&b) else {
        return Ok(());
    };
    let n = r.buffer_len();
    let mut out = [0xa5u8; BUF];
    r.emit(&mut out).unwrap();
    prop_assert_eq!(T::parse(&out[..n]).unwrap(), r);
    if clear_reserved::<T>(&mut b)? {
        prop_assert_eq!(
            T::parse(&b).unwrap(),
            r,
            "reserved bits changed what parsed"
        );
        let m = n.min(b.len());
        prop_assert_eq!(&out[..m], &b[..m]);
    }
    Ok(())
}

/// (c): emit of arbitrary field values errs, or parses back to the canonical structure.
fn arbitrary_fields<T: Subject>(seed: &[u8]) -> core::result::Result<(), TestCaseError> {
    match T::arbitrary(&mut Unstructured::new(seed)) {
        Ok(r) => emit_parse(&r),
        Err(_) => Ok(()),
    }
}

/// (c) for one structure.
fn emit_parse<T: Subject>(r: &T) -> core::result::Result<(), TestCaseError> {
    let mut out = [0xa5u8; BUF];
    if let Err(e) = r.emit(&mut out) {
        prop_assert!(
            !matches!(e, Error::BufferTooSmall { .. } | Error::Truncated { .. }),
            "{e}"
        );
        return Ok(());
    }
    let n = r.buffer_len();
    prop_assert!(
        out[n..].iter().all(|&x| x == 0xa5),
        "emit wrote past buffer_len"
    );
    let back = T::parse(&out[..n]);
    prop_assert_eq!(&back, &r.canon(), "{:?}", r);
    if let Ok(p) = back {
        let mut again = [0x5au8; BUF];
        p.emit(&mut again).unwrap();
        prop_assert_eq!(&again[..n], &out[..n]);
    }
    Ok(())
}

fn bytes(len: usize) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        1 => proptest::collection::vec(any::<u8>(), 0..len),
        4 => proptest::collection::vec(any::<u8>(), len..len + 24),
    ]
}

fn seed() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..768)
}

/// Offsets in a nested structure's error count from that structure's start; make them count
/// from the outer buffer's.
fn rebase(e: Error, inner: fn(&str) -> bool, by: usize) -> Error {
    match e {
        Error::ReservedBitsSet {
            what,
            after,
            offset,
            mask,
        } if inner(what) => Error::ReservedBitsSet {
            what,
            after,
            offset: offset + by,
            mask,
        },
        e => e,
    }
}

macro_rules! reserved {
    (view, $($m:ident)::+, $b:expr) => {
        $($m)::+::Packet::new_checked($b)?.check_reserved()
    };
    (none, $($m:ident)::+, $b:expr) => {{
        let _ = $b;
        Ok(())
    }};
    ($f:ident, $($m:ident)::+, $b:expr) => {
        $f($b)
    };
}

macro_rules! canon {
    (truncated, $r:expr) => {
        Ok($r.truncated())
    };
    (same, $r:expr) => {
        Ok(*$r)
    };
    ($f:ident, $r:expr) => {
        $f($r)
    };
}

macro_rules! fix {
    (none, $b:expr) => {
        let _ = $b;
    };
    ($f:ident, $b:expr) => {
        $f($b)
    };
}

macro_rules! prop_b {
    (here, $t:ty) => {
        proptest! {
            #[test]
            fn b_parse_emit_parse(input in bytes(<$t as Subject>::LEN)) {
                reparse::<$t>(&input)?;
            }
        }
    };
    (in_module, $t:ty) => {};
}

/// One line per structure: test name, module, reserved-bit check (`view`: the module's
/// `Packet::check_reserved`; `none`: no reserved bits), canonical form after emit
/// (`truncated`: every field cut to its width; `same`: unchanged), input fix-up, and where
/// (b) is tested.
macro_rules! subjects {
    ($( $name:ident: $($m:ident)::+, $res:ident, $canon:ident, $fix:ident, $b:ident; )*) => {
        $(
        impl Subject for $($m)::+::Repr {
            const LEN: usize = $($m)::+::LEN;
            fn parse(buf: &[u8]) -> Result<Self> {
                $($m)::+::Repr::parse(buf)
            }
            fn emit(&self, buf: &mut [u8]) -> Result<()> {
                $($m)::+::Repr::emit(self, buf)
            }
            fn buffer_len(&self) -> usize {
                $($m)::+::Repr::buffer_len(self)
            }
            fn check_reserved(buf: &[u8]) -> Result<()> {
                reserved!($res, $($m)::+, buf)
            }
            fn canon(&self) -> Result<Self> {
                canon!($canon, self)
            }
            fn fix(buf: &mut [u8]) {
                fix!($fix, buf);
            }
        }

        )*

        mod each {$(
        mod $name {
            use super::super::*;
            type T = $($m)::+::Repr;

            proptest! {
                #[test]
                fn a_any_bytes(input in bytes(<T as Subject>::LEN)) {
                    any_bytes::<T>(&input)?;
                }

                #[test]
                fn c_arbitrary_fields(seed in seed()) {
                    arbitrary_fields::<T>(&seed)?;
                }
            }

            prop_b!($b, T);
        }
        )*}
    };
}

subjects! {
    // name             module                          reserved              canon        fix        (b)
    mad_header:         mad,                            view,                 mad_canon,   mad_fix,   here;
    smp_layer:          smp,                            view,                 smp_canon,   smp_fix,   here;
    sa_layer:           sa,                             view,                 sa_canon,    sa_fix,    here;
    rmpp_header:        rmpp,                           view,                 truncated,   none,      here;
    node_info:          node_info,                      view,                 truncated,   none,      here;
    node_description:   node_description,               none,                 same,        none,      here;
    switch_info:        switch_info,                    view,                 truncated,   none,      here;
    guid_info:          guid_info,                      none,                 same,        none,      in_module;
    port_info:          port_info,                      view,                 truncated,   none,      here;
    pkey_table:         pkey_table,                     none,                 same,        none,      in_module;
    sl2vl:              sl2vl,                          none,                 same,        none,      in_module;
    vl_arb:             vl_arb,                         view,                 same,        none,      in_module;
    lft:                lft,                            none,                 same,        none,      here;
    mft:                mft,                            none,                 same,        none,      here;
    sm_info:            sm_info,                        view,                 truncated,   none,      here;
    notice:             notice,                         notice_reserved,      notice_canon, notice_fix, here;
    details_64_67:      notice::details_64_67,          view,                 truncated,   none,      here;
    details_128:        notice::details_128,            view,                 truncated,   none,      here;
    details_129_131:    notice::details_129_131,        view,                 truncated,   none,      here;
    details_144:        notice::details_144,            view,                 truncated,   none,      here;
    details_145:        notice::details_145,            view,                 truncated,   none,      here;
    details_256:        notice::details_256,            view,                 truncated,   none,      here;
    details_257_258:    notice::details_257_258,        view,                 truncated,   none,      here;
    details_259:        notice::details_259,            view,                 truncated,   none,      here;
    class_port_info:    class_port_info,                view,                 truncated,   none,      here;
    path_record:        path_record,                    view,                 truncated,   none,      here;
    multipath_record:   multipath_record,               multipath_reserved,   multipath_canon, multipath_fix, here;
    mcmember_record:    mcmember_record,                view,                 truncated,   none,      here;
    service_record:     service_record,                 view,                 same,        none,      here;
    inform_info:        inform_info,                    view,                 truncated,   none,      here;
    inform_info_record: inform_info_record,             iir_reserved,         iir_canon,   none,      here;
    node_record:        node_record,                    view,                 truncated,   none,      here;
    port_info_record:   port_info_record,               view,                 truncated,   none,      here;
    link_record:        link_record,                    view,                 truncated,   none,      here;
    switch_info_record: switch_info_record,             view,                 truncated,   none,      here;
    lft_record:         lft_record,                     view,                 truncated,   none,      here;
    mft_record:         mft_record,                     view,                 truncated,   none,      here;
    pkey_table_record:  pkey_table_record,              view,                 truncated,   none,      here;
    sl2vl_record:       sl2vl_record,                   view,                 truncated,   none,      here;
    vl_arb_record:      vl_arb_record,                  view,                 truncated,   none,      here;
    sm_info_record:     sm_info_record,                 view,                 truncated,   none,      here;
    guid_info_record:   guid_info_record,               view,                 truncated,   none,      here;
}

// ---------------------------------------------------------------------------------------------
// Per-structure rules the list refers to.

/// The header `emit` wrote must pass `parse`'s version checks, or fail them as they say.
fn mad_canon(r: &mad::Repr) -> Result<mad::Repr> {
    let t = r.truncated();
    if t.base_version != mad::BASE_VERSION {
        return Err(Error::BadBaseVersion(t.base_version));
    }
    match mad::class_version_of(t.mgmt_class) {
        Some(v) if v != t.class_version => Err(Error::BadClassVersion {
            class: t.mgmt_class.to_raw_value(),
            version: t.class_version,
        }),
        _ => Ok(t),
    }
}

fn mad_fix(b: &mut [u8]) {
    if let [base, class, version, ..] = b {
        *base = 1;
        if let Some(v) = mad::class_version_of(sm_mad::MgmtClass::from_raw_value(*class)) {
            *version = v;
        }
    }
}

/// A directed-route SMP carries 15 bits of status after the D bit.
fn smp_canon(r: &smp::Repr) -> Result<smp::Repr> {
    let mut c = *r;
    if let smp::Route::Directed(_) = r.route {
        c.status.0 &= 0x7fff;
    }
    Ok(c)
}

fn smp_fix(b: &mut [u8]) {
    if let [base, class, version, _, _, _, _, hop_count, ..] = b {
        *base = 1;
        *class = if *class & 1 == 1 { 0x81 } else { 0x01 };
        *version = 1;
        *hop_count &= 0x3f;
    }
}

fn sa_canon(r: &sa::Repr) -> Result<sa::Repr> {
    Ok(sa::Repr {
        rmpp: r.rmpp.truncated(),
        ..*r
    })
}

fn sa_fix(b: &mut [u8]) {
    if let [base, class, version, ..] = b {
        (*base, *class, *version) = (1, 3, 2);
    }
}

/// Trap numbers with a decoded DataDetails layout.
const DECODED_TRAPS: [u16; 14] = [
    64, 65, 66, 67, 128, 129, 130, 131, 144, 145, 256, 257, 258, 259,
];

fn notice_reserved(b: &[u8]) -> Result<()> {
    notice::Packet::new_checked(b)?
        .check_reserved()
        .map_err(|e| {
            let details = |what: &str| what.starts_with("Notice details");
            rebase(e, details, notice::field::DATA_DETAILS.start)
        })
}

/// Most generic notices get a decoded trap number.
fn notice_fix(b: &mut [u8]) {
    if let [head, _, _, _, hi, lo, ..] = b {
        if *head & 0x80 != 0 && *lo & 0x80 != 0 {
            let n = DECODED_TRAPS[*hi as usize % DECODED_TRAPS.len()];
            [*hi, *lo] = n.to_be_bytes();
        }
    }
}

proptest! {
    // Arbitrary trap numbers seldom hit a decoded one: an undecoded `Other` must not
    // carry one, or it would come back as the decoded variant.
    #[test]
    fn notice_other_with_a_decoded_number(seed in seed(), i in 0..DECODED_TRAPS.len()) {
        if let Ok(mut r) = notice::Repr::arbitrary(&mut Unstructured::new(&seed)) {
            r.kind = Kind::Generic {
                producer_type: notice::ProducerType::Switch,
                trap: Trap::Other {
                    trap_number: DECODED_TRAPS[i],
                    data_details: sm_mad::Bytes([0; notice::DATA_DETAILS_LEN]),
                },
            };
            emit_parse(&r)?;
        }
    }
}

fn trap_canon(t: &Trap) -> Trap {
    match t {
        Trap::GidInService(d) => Trap::GidInService(d.truncated()),
        Trap::GidOutOfService(d) => Trap::GidOutOfService(d.truncated()),
        Trap::McastGroupCreated(d) => Trap::McastGroupCreated(d.truncated()),
        Trap::McastGroupDeleted(d) => Trap::McastGroupDeleted(d.truncated()),
        Trap::LinkStateChange(d) => Trap::LinkStateChange(d.truncated()),
        Trap::LinkIntegrityThreshold(d) => Trap::LinkIntegrityThreshold(d.truncated()),
        Trap::BufferOverrunThreshold(d) => Trap::BufferOverrunThreshold(d.truncated()),
        Trap::FlowControlWatchdog(d) => Trap::FlowControlWatchdog(d.truncated()),
        Trap::LocalChanges(d) => Trap::LocalChanges(d.truncated()),
        Trap::SystemImageGuidChange(d) => Trap::SystemImageGuidChange(d.truncated()),
        Trap::BadMKey(d) => Trap::BadMKey(d.truncated()),
        Trap::BadPKey(d) => Trap::BadPKey(d.truncated()),
        Trap::BadQKey(d) => Trap::BadQKey(d.truncated()),
        Trap::BadSwitchPKey(d) => Trap::BadSwitchPKey(d.truncated()),
        other => *other,
    }
}

fn notice_canon(r: &notice::Repr) -> Result<notice::Repr> {
    use notice::field as f;
    let kind = match &r.kind {
        Kind::Generic {
            producer_type,
            trap,
        } => Kind::Generic {
            producer_type: producer_type.truncated(f::PRODUCER_TYPE.width),
            trap: trap_canon(trap),
        },
        Kind::Vendor {
            vendor_id,
            device_id,
            data_details,
        } => Kind::Vendor {
            vendor_id: vendor_id.truncated(f::VENDOR_ID.width),
            device_id: *device_id,
            data_details: *data_details,
        },
    };
    Ok(notice::Repr {
        notice_type: r.notice_type.truncated(f::TYPE.width),
        kind,
        notice_count: r.notice_count.truncated(f::NOTICE_COUNT.width),
        ..*r
    })
}

/// The header's reserved bits, then the GID slots past the counts: `emit` zeroes them.
fn multipath_reserved(b: &[u8]) -> Result<()> {
    use multipath_record::{HEADER_LEN, MAX_GIDS, Packet, field};
    if b.len() < HEADER_LEN {
        return Err(Error::Truncated {
            what: "MultiPathRecord",
            need: HEADER_LEN,
            got: b.len(),
        });
    }
    Packet::new_unchecked(b).check_reserved()?;
    let n = usize::from(field::SGID_COUNT.get(b)) + usize::from(field::DGID_COUNT.get(b));
    let end = HEADER_LEN + 16 * n.min(MAX_GIDS);
    match b.iter().enumerate().skip(end).find(|(_, x)| **x != 0) {
        Some((offset, &mask)) => Err(Error::ReservedBitsSet {
            what: "MultiPathRecord",
            after: "sdgid",
            offset,
            mask,
        }),
        None => Ok(()),
    }
}

fn multipath_canon(r: &multipath_record::Repr) -> Result<multipath_record::Repr> {
    use multipath_record::field as f;
    let mut c = multipath_record::Repr {
        flow_label: r.flow_label.truncated(f::FLOW_LABEL.width),
        numb_path: r.numb_path.truncated(f::NUMB_PATH.width),
        qos_class: r.qos_class.truncated(f::QOS_CLASS.width),
        sl: r.sl.truncated(f::SL.width),
        mtu_selector: r.mtu_selector.truncated(f::MTU_SELECTOR.width),
        mtu: r.mtu.truncated(f::MTU.width),
        rate_selector: r.rate_selector.truncated(f::RATE_SELECTOR.width),
        rate: r.rate.truncated(f::RATE.width),
        packet_life_time_selector: r
            .packet_life_time_selector
            .truncated(f::PACKET_LIFE_TIME_SELECTOR.width),
        packet_life_time: r.packet_life_time.truncated(f::PACKET_LIFE_TIME.width),
        independence_selector: r
            .independence_selector
            .truncated(f::INDEPENDENCE_SELECTOR.width),
        ..*r
    };
    let n = usize::from(r.sgid_count) + usize::from(r.dgid_count);
    for g in c.gids.iter_mut().skip(n) {
        *g = Default::default();
    }
    Ok(c)
}

fn multipath_fix(b: &mut [u8]) {
    if let Some(c) = b.get_mut(15..17) {
        c[0] %= 7;
        c[1] %= 5;
    }
}

fn iir_reserved(b: &[u8]) -> Result<()> {
    inform_info_record::Packet::new_checked(b)?
        .check_reserved()
        .map_err(|e| {
            let inner = |what: &str| what == "InformInfo";
            rebase(e, inner, inform_info_record::field::INFORM_INFO.start)
        })
}

fn iir_canon(r: &inform_info_record::Repr) -> Result<inform_info_record::Repr> {
    Ok(inform_info_record::Repr {
        inform_info: r.inform_info.truncated(),
        ..*r
    })
}

// ---------------------------------------------------------------------------------------------
// The SMP layer: every attribute in an SMP's data.

/// An attribute in arbitrary SMPs: emit both, parse both back.
fn smp_with<A: Subject + SmpAttribute>(seed: &[u8]) -> core::result::Result<(), TestCaseError> {
    let mut u = Unstructured::new(seed);
    let (Ok(mut s), Ok(a)) = (smp::Repr::arbitrary(&mut u), A::arbitrary(&mut u)) else {
        return Ok(());
    };
    s.attr_id = A::ID;
    if let Err(e) = s.set_attribute(&a) {
        // Only what cannot go into 64 bytes (a Notice with IssuerGID) or cannot be encoded.
        prop_assert!(
            matches!(
                e,
                Error::BufferTooSmall { .. }
                    | Error::InvalidField { .. }
                    | Error::HopCountTooLarge(_)
            ),
            "{e}"
        );
        return Ok(());
    }
    let Ok(bytes) = s.to_bytes() else {
        return Ok(());
    };
    let back = smp::Repr::parse(&bytes).unwrap();
    prop_assert_eq!(back, s.canon().unwrap());
    prop_assert_eq!(back.attribute::<A>(), a.canon());
    Ok(())
}

/// Arbitrary SMP bytes holding the attribute: whole SMP exact once reserved bits are clear.
fn smp_bytes_with<A: Subject + SmpAttribute>(
    input: &[u8],
) -> core::result::Result<(), TestCaseError> {
    let mut b = [0u8; smp::LEN];
    let n = input.len().min(smp::LEN);
    b[..n].copy_from_slice(&input[..n]);
    smp_fix(&mut b);
    b[16..18].copy_from_slice(&A::ID.to_be_bytes());
    prop_assert!(clear_reserved::<smp::Repr>(&mut b)?);
    // The data past the attribute is not the attribute's: `set_attribute` zeroes it.
    let data = &mut b[smp::field::DATA];
    data[<A as Subject>::LEN.min(smp::DATA_LEN)..].fill(0);
    prop_assert!(clear_reserved::<A>(data)?);
    let s = smp::Repr::parse(&b).unwrap();
    let Ok(a) = s.attribute::<A>() else {
        return Ok(());
    };
    let mut again = s;
    again.set_attribute(&a).unwrap();
    prop_assert_eq!(again.to_bytes().unwrap(), b);
    Ok(())
}

macro_rules! smp_attributes {
    ($( $m:ident ),* $(,)?) => {
        mod smp_attributes {$(
            mod $m {
                use super::super::*;
                type A = $m::Repr;
                proptest! {
                    #[test]
                    fn in_arbitrary_smp(seed in seed()) {
                        smp_with::<A>(&seed)?;
                    }

                    #[test]
                    fn smp_bytes_exact(input in proptest::collection::vec(any::<u8>(), smp::LEN)) {
                        smp_bytes_with::<A>(&input)?;
                    }
                }
            }
        )*}
    };
}

smp_attributes! {
    node_info, node_description, switch_info, guid_info, port_info, pkey_table, sl2vl, vl_arb,
    lft, mft, sm_info, notice,
}

// ---------------------------------------------------------------------------------------------
// The SA layer: every record in SA data.

/// Arbitrary records packed as a table answer come back from the payload; when they fit
/// one MAD, also through a whole single-segment GetTableResp.
fn sa_table_of<R: Subject + Wire>(seed: &[u8]) -> core::result::Result<(), TestCaseError> {
    let mut u = Unstructured::new(seed);
    let Ok(records) = u
        .arbitrary_iter::<R>()
        .and_then(|it| it.take(6).collect::<arbitrary::Result<Vec<R>>>())
    else {
        return Ok(());
    };
    let (offset, payload) = match sa::pack_records(&records) {
        Ok(p) => p,
        Err(e) => {
            prop_assert!(!matches!(e, Error::BufferTooSmall { .. }), "{e}");
            return Ok(());
        }
    };
    let want: Vec<Result<R>> = records.iter().map(R::canon).collect();
    let back: Vec<Result<R>> = sa::records::<R>(&payload, offset).unwrap().collect();
    prop_assert_eq!(&back, &want);

    if payload.len() <= sa::DATA_LEN {
        let mut m = sa::Repr::request(sm_mad::Method::GetTable, sm_mad::Tid(7), 0, 0)
            .response(sm_mad::MadStatus::OK);
        m.attribute_offset = offset;
        m.rmpp = rmpp::Repr::data(
            1,
            rmpp::RmppFlags::FIRST | rmpp::RmppFlags::LAST,
            (sa::SA_HEADER_LEN + payload.len()) as u32,
        );
        m.data.0[..payload.len()].copy_from_slice(&payload);
        let parsed = sa::Repr::parse(&m.to_bytes().unwrap()).unwrap();
        prop_assert_eq!(parsed.payload(), &payload[..]);
        let back: Vec<Result<R>> = sa::records::<R>(parsed.payload(), parsed.attribute_offset)
            .unwrap()
            .collect();
        prop_assert_eq!(&back, &want);
    }
    Ok(())
}

/// Any payload and offset: the walk fails with a typed error or yields records that
/// re-emit stably.
fn sa_walk_of<R: Subject + Wire>(
    payload: &[u8],
    offset: u16,
) -> core::result::Result<(), TestCaseError> {
    let Ok(walk) = sa::records::<R>(payload, offset) else {
        return Ok(());
    };
    for r in walk.flatten() {
        let mut out = [0u8; BUF];
        Subject::emit(&r, &mut out).unwrap();
        prop_assert_eq!(<R as Subject>::parse(&out[..r.buffer_len()]).unwrap(), r);
    }
    Ok(())
}

macro_rules! sa_records {
    ($( $m:ident ),* $(,)?) => {
        mod sa_records {$(
            mod $m {
                use super::super::*;
                type R = $m::Repr;
                proptest! {
                    #[test]
                    fn table_round_trip(seed in proptest::collection::vec(any::<u8>(), 0..2048)) {
                        sa_table_of::<R>(&seed)?;
                    }

                    #[test]
                    fn any_payload(
                        payload in proptest::collection::vec(any::<u8>(), 0..600),
                        offset in prop_oneof![any::<u16>(), 0u16..40],
                    ) {
                        sa_walk_of::<R>(&payload, offset)?;
                    }
                }
            }
        )*}
    };
}

sa_records! {
    class_port_info, path_record, multipath_record, mcmember_record, service_record,
    inform_info, inform_info_record, node_record, port_info_record, link_record,
    switch_info_record, lft_record, mft_record, pkey_table_record, sl2vl_record,
    vl_arb_record, sm_info_record, guid_info_record,
}

proptest! {
    // Every way a GUID is written reads back as the same GUID.
    #[test]
    fn guid_text_round_trip(v in any::<u64>()) {
        let g = sm_mad::Guid(v);
        let colon = format!(
            "{:04x}:{:04x}:{:04x}:{:04x}",
            v >> 48,
            (v >> 32) & 0xffff,
            (v >> 16) & 0xffff,
            v & 0xffff
        );
        for text in [g.to_string(), format!("{v:#x}"), colon, v.to_string()] {
            prop_assert_eq!(text.parse::<sm_mad::Guid>(), Ok(g), "{}", text);
        }
    }

    // Any text: an answer, never a panic; what parses is a GUID written in one of the forms.
    #[test]
    fn guid_parse_any_text(s in "[0-9a-fA-FxX:+ _-]{0,24}|\\PC{0,24}") {
        if let Ok(g) = s.parse::<sm_mad::Guid>() {
            let hex = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X"));
            let digits: String = s.chars().filter(|c| *c != ':').collect();
            let back = match hex {
                Some(h) => u64::from_str_radix(h, 16).ok(),
                None if s.contains(':') => u64::from_str_radix(&digits, 16).ok(),
                None => s.parse::<u64>().ok(),
            };
            prop_assert_eq!(back, Some(g.0));
        }
    }
}
