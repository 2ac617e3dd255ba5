//! Bad input gives the specific typed error, never a panic: truncated buffers, wrong
//! versions, unknown classes, attributes parsed from the wrong bytes, reserved bits set, too
//! many hops, RMPP segments out of order. Most inputs start from captured MADs
//! (`tests/vectors`) with one thing broken.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use sm_mad::rmpp::{self, ReceiverState, RmppFlags, RmppReceiver, RmppStatus, RmppType, Segmenter};
use sm_mad::smp::{self, Directed, Route};
use sm_mad::{
    Error, Lid, MAD_LEN, Method, MgmtClass, RmppError, Tid, Vl, Wire, attr, class_port_info,
    guid_info, inform_info, inform_info_record, lft, mad, mcmember_record, mft, multipath_record,
    node_description, node_info, notice, path_record, pkey_table, port_info, sa, service_record,
    sl2vl, sm_info, switch_info, vl_arb,
};

const DR_NODE_INFO: &str = "dr_nodeinfo_hca_local.resp";
const LR_NODE_INFO: &str = "lr_nodeinfo_hca.resp";
const DR_PORT_INFO: &str = "dr_portinfo_hca_local.resp";
const DR_SWITCH_INFO: &str = "dr_switchinfo.resp";
const SA_PATH_RECORD: &str = "sa_pathrecord.resp";
const SA_NODE_RECORD: &str = "sa_noderecord.resp";

// ---------------------------------------------------------------------------------------------
// Truncated buffers

/// Every length short of a whole `W`: `Truncated` naming it, its length and what was given;
/// `emit` into the same lengths: `BufferTooSmall`.
fn truncated_everywhere<W: Wire + Default>() {
    let full = [0u8; 256];
    for got in 0..W::LEN {
        assert_eq!(
            W::parse(&full[..got]).err(),
            Some(Error::Truncated {
                what: W::NAME,
                need: W::LEN,
                got
            }),
            "{} from {got} bytes",
            W::NAME
        );
        let mut out = [0u8; 256];
        assert_eq!(
            W::default().emit(&mut out[..got]),
            Err(Error::BufferTooSmall {
                what: W::NAME,
                need: W::LEN,
                got
            }),
            "{} into {got} bytes",
            W::NAME
        );
    }
}

#[test]
fn every_fixed_structure_reports_its_truncation() {
    truncated_everywhere::<mad::Repr>();
    truncated_everywhere::<rmpp::Repr>();
    truncated_everywhere::<node_info::Repr>();
    truncated_everywhere::<node_description::Repr>();
    truncated_everywhere::<switch_info::Repr>();
    truncated_everywhere::<guid_info::Repr>();
    truncated_everywhere::<port_info::Repr>();
    truncated_everywhere::<pkey_table::Repr>();
    truncated_everywhere::<sl2vl::Repr>();
    truncated_everywhere::<vl_arb::Repr>();
    truncated_everywhere::<lft::Repr>();
    truncated_everywhere::<mft::Repr>();
    truncated_everywhere::<sm_info::Repr>();
    truncated_everywhere::<notice::details_128::Repr>();
    truncated_everywhere::<notice::details_259::Repr>();
    truncated_everywhere::<class_port_info::Repr>();
    truncated_everywhere::<path_record::Repr>();
    truncated_everywhere::<mcmember_record::Repr>();
    truncated_everywhere::<service_record::Repr>();
    truncated_everywhere::<inform_info::Repr>();
    truncated_everywhere::<inform_info_record::Repr>();
    truncated_everywhere::<sa::Repr>();
}

#[test]
fn truncated_mads() {
    let smp_bytes = support::mad(DR_NODE_INFO);
    for got in [0, 1, 23, 24, 64, 255] {
        assert_eq!(
            smp::Repr::parse(&smp_bytes[..got]),
            Err(Error::Truncated {
                what: "SMP",
                need: 256,
                got
            })
        );
    }
    // An SA answer as short as OpenSM hands it to umad (168 bytes for one NodeRecord).
    let short = support::bytes(SA_NODE_RECORD);
    assert_eq!(
        sa::Repr::parse(&short),
        Err(Error::Truncated {
            what: "SA MAD",
            need: 256,
            got: short.len()
        })
    );
    assert_eq!(
        rmpp::Repr::parse_mad(&short[..35]),
        Err(Error::Truncated {
            what: "RMPP header",
            need: 36,
            got: 35
        })
    );
    assert_eq!(
        smp::set_direction(&mut [0u8; 100], true),
        Err(Error::Truncated {
            what: "SMP",
            need: 256,
            got: 100
        })
    );
}

#[test]
fn truncated_variable_structures() {
    // A Notice needs its 64 bytes; IssuerGID is read only when present.
    assert_eq!(
        notice::Repr::parse(&[0x80; 63]),
        Err(Error::Truncated {
            what: "Notice",
            need: 64,
            got: 63
        })
    );
    assert_eq!(
        notice::Trap::parse(notice::trap::LINK_STATE_CHANGE, &[0; 53]),
        Err(Error::Truncated {
            what: "Notice details 128",
            need: 54,
            got: 53
        })
    );
    assert_eq!(
        notice::Trap::parse(1000, &[0; 53]),
        Err(Error::Truncated {
            what: "Notice data details",
            need: 54,
            got: 53
        })
    );
    // MultiPathRecord: the header announces 2 + 1 GIDs, the buffer ends inside the third.
    let mut b = [0u8; 24 + 16 * 3];
    b[15] = 2;
    b[16] = 1;
    assert_eq!(
        multipath_record::Repr::parse(&b[..24 + 16 * 3 - 1]),
        Err(Error::Truncated {
            what: "MultiPathRecord",
            need: 72,
            got: 71
        })
    );
    assert!(multipath_record::Repr::parse(&b).is_ok());
    assert_eq!(
        multipath_record::Repr::parse(&b[..23]),
        Err(Error::Truncated {
            what: "MultiPathRecord",
            need: 24,
            got: 23
        })
    );
    // A table payload that ends inside its last record.
    let one = support::bytes(SA_PATH_RECORD);
    let payload = [&one[sa::HEADER_LEN..], &[0u8; 64][..]].concat();
    assert_eq!(payload.len(), 128);
    assert!(sa::records::<path_record::Repr>(&payload, 8).is_ok());
    assert_eq!(
        sa::records::<path_record::Repr>(&payload[..100], 8).err(),
        Some(Error::Truncated {
            what: "PathRecord",
            need: 64,
            got: 36
        })
    );
}

// ---------------------------------------------------------------------------------------------
// Versions and classes

#[test]
fn wrong_base_version() {
    for name in [DR_NODE_INFO, LR_NODE_INFO, SA_NODE_RECORD] {
        for v in [0, 2, 0xff] {
            let mut b = support::mad(name);
            b[0] = v;
            assert_eq!(
                mad::Repr::parse(&b),
                Err(Error::BadBaseVersion(v)),
                "{name}"
            );
            let e = if name.starts_with("sa_") {
                sa::Repr::parse(&b).err()
            } else {
                smp::Repr::parse(&b).err()
            };
            assert_eq!(e, Some(Error::BadBaseVersion(v)), "{name}");
        }
    }
}

#[test]
fn wrong_class_version() {
    let mut b = support::mad(DR_NODE_INFO);
    b[2] = 2;
    assert_eq!(
        smp::Repr::parse(&b),
        Err(Error::BadClassVersion {
            class: 0x81,
            version: 2
        })
    );
    let mut b = support::mad(SA_NODE_RECORD);
    b[2] = 1;
    assert_eq!(
        sa::Repr::parse(&b),
        Err(Error::BadClassVersion {
            class: 0x03,
            version: 1
        })
    );
}

#[test]
fn unknown_or_wrong_class() {
    // The common header keeps a class it does not know...
    let mut b = support::mad(DR_NODE_INFO);
    b[1] = 0x30;
    assert_eq!(
        mad::Repr::parse(&b).unwrap().mgmt_class,
        MgmtClass::Unknown(0x30)
    );
    // ...but the SMP and SA layers take only their own classes.
    assert_eq!(smp::Repr::parse(&b), Err(Error::UnsupportedClass(0x30)));
    assert_eq!(sa::Repr::parse(&b), Err(Error::UnsupportedClass(0x30)));
    assert_eq!(
        smp::Repr::parse(&support::mad(SA_NODE_RECORD)),
        Err(Error::UnsupportedClass(0x03))
    );
    assert_eq!(
        sa::Repr::parse(&support::mad(DR_NODE_INFO)),
        Err(Error::UnsupportedClass(0x81))
    );
    assert_eq!(
        sa::Repr::parse(&support::mad(LR_NODE_INFO)),
        Err(Error::UnsupportedClass(0x01))
    );
    // Performance management has a known version but no codec here.
    let mut b = support::mad(LR_NODE_INFO);
    b[1] = 0x04;
    assert_eq!(smp::Repr::parse(&b), Err(Error::UnsupportedClass(0x04)));
}

// ---------------------------------------------------------------------------------------------
// Unknown attributes: no dispatcher decodes by attribute id, so an unknown id is kept, and an
// attribute parsed from another one's bytes fails where its layout can tell.

#[test]
fn unknown_attribute_id_is_kept() {
    let mut b = support::mad(DR_NODE_INFO);
    b[16..18].copy_from_slice(&0x7777u16.to_be_bytes());
    let s = smp::Repr::parse(&b).unwrap();
    assert_eq!(s.attr_id, 0x7777);
    assert_eq!(
        attr::SmpAttrId::from_raw_value(s.attr_id),
        attr::SmpAttrId::Unknown(0x7777)
    );
    assert_eq!(s.to_bytes().unwrap(), b);
    assert_eq!(
        attr::SaAttrId::from_raw_value(0x7777),
        attr::SaAttrId::Unknown(0x7777)
    );
}

#[test]
fn attributes_on_the_wrong_bytes() {
    // A switch's NodeInfo (BaseVersion 1, ClassVersion 1, NodeType 2) read as a MAD header:
    // class 1 (LID-routed SMP) with class version 2.
    let mut s = smp::Repr::parse(&support::mad("dr_nodeinfo_switch.resp")).unwrap();
    assert_eq!(
        s.attribute::<mad::Repr>(),
        Err(Error::BadClassVersion {
            class: 0x01,
            version: 2
        })
    );
    // An MCMemberRecord read as a MultiPathRecord: the GID counts fall on the last byte of
    // the MGID (ff12:401b:ffff::ffff:ffff) and the first of the port GID (::).
    let mcmr = support::mad("sa_mcmemberrecord.resp");
    assert_eq!(
        multipath_record::Repr::parse(&mcmr[sa::HEADER_LEN..]),
        Err(Error::InvalidField {
            what: "MultiPathRecord",
            field: "sgid_count + dgid_count",
            value: 0xff
        })
    );
    // A 64-byte attribute cannot come from an SMP's 64-byte data field shifted by one.
    assert_eq!(
        port_info::Repr::parse(&s.data.0[1..]),
        Err(Error::Truncated {
            what: "PortInfo",
            need: 64,
            got: 63
        })
    );
    // ClassPortInfo is 72 bytes: no SMP can carry it.
    assert_eq!(
        s.attribute::<class_port_info::Repr>(),
        Err(Error::Truncated {
            what: "ClassPortInfo",
            need: 72,
            got: 64
        })
    );
    // A Notice with IssuerGID does not fit an SMP either.
    let mut with_gid = notice::Repr::trap_128(Lid(1), Lid(1));
    with_gid.issuer_gid = Some(Default::default());
    assert_eq!(
        s.set_attribute(&with_gid),
        Err(Error::BufferTooSmall {
            what: "Notice",
            need: 80,
            got: 64
        })
    );
}

#[test]
fn attribute_modifiers_out_of_range() {
    assert_eq!(
        lft::block_from_attr_mod(768),
        Err(Error::InvalidField {
            what: "LinearForwardingTable attribute modifier",
            field: "block",
            value: 768
        })
    );
    assert_eq!(
        vl_arb::Modifier::from_attr_mod(5 << 16),
        Err(Error::InvalidField {
            what: "VLArbitrationTable attribute modifier",
            field: "block",
            value: 5
        })
    );
    assert_eq!(
        sl2vl::Modifier::from_attr_mod(1 << 18),
        Err(Error::InvalidField {
            what: "SLtoVLMappingTable attribute modifier",
            field: "reserved",
            value: 1 << 18
        })
    );
    assert_eq!(
        mft::Modifier::from_attr_mod(1 << 9),
        Err(Error::InvalidField {
            what: "MulticastForwardingTable attribute modifier",
            field: "reserved",
            value: 1 << 9
        })
    );
    assert_eq!(
        pkey_table::Modifier::from_attr_mod(1 << 24),
        Err(Error::InvalidField {
            what: "P_KeyTable attribute modifier",
            field: "reserved",
            value: 1 << 24
        })
    );
}

#[test]
fn values_emit_refuses() {
    let mut t = sl2vl::Repr::default();
    t.sl_to_vl[3] = Vl(16);
    assert_eq!(
        t.emit(&mut [0; 8]),
        Err(Error::InvalidField {
            what: "SLtoVLMappingTable",
            field: "vl",
            value: 16
        })
    );
    let mut a = vl_arb::Repr::default();
    a.vl_arbitration_table[0] = vl_arb::Entry::new(20, 1);
    assert_eq!(
        a.emit(&mut [0; 64]),
        Err(Error::InvalidField {
            what: "VLArbitrationTable",
            field: "vl",
            value: 20
        })
    );
    let mp = multipath_record::Repr {
        sgid_count: 6,
        dgid_count: 6,
        ..Default::default()
    };
    assert_eq!(
        mp.emit(&mut [0; 200]),
        Err(Error::InvalidField {
            what: "MultiPathRecord",
            field: "sgid_count + dgid_count",
            value: 12
        })
    );
    let other = notice::Trap::Other {
        trap_number: notice::trap::LINK_STATE_CHANGE,
        data_details: sm_mad::Bytes([0; notice::DATA_DETAILS_LEN]),
    };
    assert_eq!(
        other.emit(&mut [0; 54]),
        Err(Error::InvalidField {
            what: "Notice",
            field: "trap_number",
            value: 128
        })
    );
}

// ---------------------------------------------------------------------------------------------
// Reserved bits: parse ignores them, emit clears them, check_reserved names the field before.

#[test]
fn reserved_bits_are_named_by_the_field_before_them() {
    // MAD header: bytes 18..20 follow AttributeID.
    let mut b = support::mad(LR_NODE_INFO);
    b[19] = 0x01;
    assert_eq!(
        mad::Packet::new_checked(&b[..]).unwrap().check_reserved(),
        Err(Error::ReservedBitsSet {
            what: "MAD header",
            after: "attr_id",
            offset: 19,
            mask: 0x01
        })
    );
    // LID-routed SMP: the class-specific word is reserved, and so are bytes 32..64.
    let mut b = support::mad(LR_NODE_INFO);
    b[7] = 0x05;
    assert_eq!(
        smp::Packet::new_checked(&b[..]).unwrap().check_reserved(),
        Err(Error::ReservedBitsSet {
            what: "SMP",
            after: "status",
            offset: 7,
            mask: 0x05
        })
    );
    let mut b = support::mad(LR_NODE_INFO);
    // The capture's last 24 bytes are noise (see the vectors' README): clear them first.
    b[232..].fill(0);
    assert!(
        smp::Packet::new_checked(&b[..])
            .unwrap()
            .check_reserved()
            .is_ok()
    );
    b[40] = 0x80;
    assert_eq!(
        smp::Packet::new_checked(&b[..]).unwrap().check_reserved(),
        Err(Error::ReservedBitsSet {
            what: "SMP",
            after: "m_key",
            offset: 40,
            mask: 0x80
        })
    );
    // Directed route: bytes 36..64 follow DrDLID.
    let mut b = support::mad(DR_NODE_INFO);
    assert!(
        smp::Packet::new_checked(&b[..])
            .unwrap()
            .check_reserved()
            .is_ok()
    );
    b[36] = 0x10;
    assert_eq!(
        smp::Packet::new_checked(&b[..]).unwrap().check_reserved(),
        Err(Error::ReservedBitsSet {
            what: "SMP",
            after: "dr_dlid",
            offset: 36,
            mask: 0x10
        })
    );
    // SA: bytes 46..48 follow AttributeOffset.
    let mut b = support::mad(SA_NODE_RECORD);
    assert!(
        sa::Packet::new_checked(&b[..])
            .unwrap()
            .check_reserved()
            .is_ok()
    );
    b[46] = 0xff;
    assert_eq!(
        sa::Packet::new_checked(&b[..]).unwrap().check_reserved(),
        Err(Error::ReservedBitsSet {
            what: "SA MAD",
            after: "attribute_offset",
            offset: 46,
            mask: 0xff
        })
    );
    // PortInfo: the three bits between M_KeyProtectBits and LMC.
    let s = smp::Repr::parse(&support::mad(DR_PORT_INFO)).unwrap();
    let mut data = s.data.0;
    assert!(
        port_info::Packet::new_checked(&data[..])
            .unwrap()
            .check_reserved()
            .is_ok()
    );
    data[34] |= 0x08;
    assert_eq!(
        port_info::Packet::new_checked(&data[..])
            .unwrap()
            .check_reserved(),
        Err(Error::ReservedBitsSet {
            what: "PortInfo",
            after: "m_key_protect_bits",
            offset: 34,
            mask: 0x08
        })
    );
    // ... which parse ignores and emit clears.
    let pi = port_info::Repr::parse(&data).unwrap();
    assert_eq!(pi, s.attribute::<port_info::Repr>().unwrap());
    let mut out = [0u8; 64];
    pi.emit(&mut out).unwrap();
    assert_eq!(out, s.data.0);
    // SwitchInfo: the bits after EnhancedPort0.
    let s = smp::Repr::parse(&support::mad(DR_SWITCH_INFO)).unwrap();
    let mut data = s.data.0;
    data[16] |= 0x04;
    assert_eq!(
        switch_info::Packet::new_checked(&data[..])
            .unwrap()
            .check_reserved(),
        Err(Error::ReservedBitsSet {
            what: "SwitchInfo",
            after: "enhanced_port0",
            offset: 16,
            mask: 0x04
        })
    );
    // Notice DataDetails of trap 128: offsets count from DataDetails.
    let mut n = [0u8; 64];
    notice::Repr::trap_128(Lid(3), Lid(3)).emit(&mut n).unwrap();
    n[10 + 2] = 0x40;
    assert_eq!(
        notice::Packet::new_checked(&n[..])
            .unwrap()
            .check_reserved(),
        Err(Error::ReservedBitsSet {
            what: "Notice details 128",
            after: "lid_addr",
            offset: 2,
            mask: 0x40
        })
    );
}

// ---------------------------------------------------------------------------------------------
// Directed routes longer than the path arrays

#[test]
fn hop_count_over_63() {
    for hops in [64, 100, 255] {
        let mut b = support::mad(DR_NODE_INFO);
        b[7] = hops;
        assert_eq!(smp::Repr::parse(&b), Err(Error::HopCountTooLarge(hops)));
    }
    let mut b = support::mad(DR_NODE_INFO);
    b[7] = 63;
    assert!(smp::Repr::parse(&b).is_ok());

    let mut r = smp::Repr::parse(&support::mad(DR_NODE_INFO)).unwrap();
    if let Route::Directed(d) = &mut r.route {
        d.hop_count = 64;
    }
    assert_eq!(r.to_bytes(), Err(Error::HopCountTooLarge(64)));
    assert_eq!(Directed::along(&[1; 64]), Err(Error::HopCountTooLarge(64)));
    assert_eq!(
        smp::Repr::dr_get(Tid(1), attr::NODE_INFO, 0, &[2; 300]),
        Err(Error::HopCountTooLarge(255))
    );
}

// ---------------------------------------------------------------------------------------------
// RMPP

fn table_segments(len: usize) -> Vec<[u8; MAD_LEN]> {
    let t = sa::Repr::request(Method::GetTable, Tid(0x42), attr::NODE_INFO, 0)
        .response(Default::default());
    let payload = (0..len).map(|i| i as u8).collect();
    Segmenter::sa(&t, payload).unwrap().segments().collect()
}

#[test]
fn rmpp_segment_out_of_order() {
    let segs = table_segments(1000); // 5 segments
    let mut rx = RmppReceiver::sa();
    // Before the first segment nothing can be acknowledged: the error says what came.
    assert_eq!(
        rx.handle_mad(&segs[2]),
        Err(Error::Rmpp(RmppError::OutOfOrder {
            expected: 1,
            got: 3
        }))
    );
    assert_eq!(rx.state(), &ReceiverState::Waiting);
    assert!(rx.poll_transmit().is_none());
    // Later a gap is answered by acknowledging the last in-order segment again.
    rx.handle_mad(&segs[0]).unwrap();
    let _first_ack = rx.poll_transmit().unwrap();
    rx.handle_mad(&segs[3]).unwrap();
    let ack = rmpp::Repr::parse_mad(&rx.poll_transmit().unwrap()).unwrap();
    assert_eq!((ack.rmpp_type, ack.segment_number()), (RmppType::Ack, 1));
    assert_eq!(rx.state(), &ReceiverState::Receiving);
}

#[test]
fn rmpp_violations_fail_the_transfer_with_an_abort() {
    let segs = table_segments(1000);

    // Segment 1 without the First flag.
    let mut bad = segs[0];
    let mut h = rmpp::Repr::parse_mad(&bad).unwrap();
    h.rmpp_flags = RmppFlags::ACTIVE;
    h.emit_mad(&mut bad).unwrap();
    let mut rx = RmppReceiver::sa();
    assert_eq!(
        rx.handle_mad(&bad),
        Err(Error::Rmpp(RmppError::BadFirst(1)))
    );
    assert_eq!(rx.state(), &ReceiverState::Failed(RmppError::BadFirst(1)));
    let abort = rmpp::Repr::parse_mad(&rx.poll_transmit().unwrap()).unwrap();
    assert_eq!(
        (abort.rmpp_type, abort.rmpp_status),
        (
            RmppType::Abort,
            RmppStatus::InconsistentFirstAndSegmentNumber
        )
    );

    // A version the protocol does not have.
    let mut bad = segs[0];
    bad[rmpp::OFFSET] = 2;
    let mut rx = RmppReceiver::sa();
    assert_eq!(
        rx.handle_mad(&bad),
        Err(Error::Rmpp(RmppError::BadVersion(2)))
    );

    // Not an RMPP MAD at all.
    let mut bad = segs[0];
    bad[rmpp::OFFSET + 2] = 0;
    assert_eq!(
        RmppReceiver::sa().handle_mad(&bad),
        Err(Error::Rmpp(RmppError::NotActive))
    );

    // A segment beyond the five the first one announced.
    let mut rx = RmppReceiver::sa();
    rx.handle_mad(&segs[0]).unwrap();
    let mut sixth = segs[1];
    rmpp::Repr::data(6, RmppFlags::NONE, 0)
        .emit_mad(&mut sixth)
        .unwrap();
    assert_eq!(
        rx.handle_mad(&sixth),
        Err(Error::Rmpp(RmppError::TooManySegments(6)))
    );

    // A MAD of another transfer changes nothing.
    let mut rx = RmppReceiver::sa();
    rx.handle_mad(&segs[0]).unwrap();
    let mut other = segs[1];
    other[8..16].copy_from_slice(&0x43u64.to_be_bytes());
    assert_eq!(
        rx.handle_mad(&other),
        Err(Error::Rmpp(RmppError::WrongTransfer {
            expected: 0x42,
            got: 0x43
        }))
    );
    assert_eq!(rx.state(), &ReceiverState::Receiving);

    // A short segment.
    assert_eq!(
        RmppReceiver::sa().handle_mad(&segs[0][..200]),
        Err(Error::Truncated {
            what: "RMPP segment",
            need: 256,
            got: 200
        })
    );
}
