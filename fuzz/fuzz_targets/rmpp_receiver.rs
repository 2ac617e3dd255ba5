#![no_main]
//! An RMPP receiver fed the segments of a real transfer, delivered in any order, repeated,
//! cut short, or with arbitrary RMPP headers, TIDs and methods. It must never panic, every
//! MAD it sends must be an ACK or ABORT of the transfer, and when only genuine segments
//! arrived, a complete transfer must hold exactly the payload that was sent.

use libfuzzer_sys::fuzz_target;
use sm_mad::rmpp::{self, ReceiverConfig, ReceiverState, RmppReceiver, RmppType, Segmenter};
use sm_mad::{Method, Tid, sa};

fuzz_target!(|data: &[u8]| {
    let Some((head, steps)) = data.split_first_chunk::<3>() else {
        return;
    };
    let len = usize::from(u16::from_be_bytes([head[0], head[1]])) % 3000;
    let payload: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
    let template =
        sa::Repr::request(Method::GetTable, Tid(0x1234), 0x11, 0).response(Default::default());
    let segs: Vec<_> = Segmenter::sa(&template, payload.clone())
        .expect("a small payload segments")
        .segments()
        .collect();
    let config = ReceiverConfig {
        window: u32::from(head[2] % 8) + 1,
        max_segments: 64,
        ..ReceiverConfig::default()
    };
    let mut rx = RmppReceiver::new(config).expect("a valid config");
    let mut genuine = true;
    for step in steps.chunks(14) {
        let [which, op, rest @ ..] = step else {
            break;
        };
        let mut mad = segs[usize::from(*which) % segs.len()];
        let mut cut = mad.len();
        match op % 8 {
            4 if rest.len() >= 12 => {
                mad[rmpp::OFFSET..rmpp::HEADER_END].copy_from_slice(&rest[..12]);
                genuine = false;
            }
            5 => mad[15] ^= rest.first().copied().unwrap_or(1) | 1, // another TID
            6 => cut = usize::from(rest.first().copied().unwrap_or(0)),
            7 => mad[3] ^= 0x80, // the method's response bit
            _ => {}
        }
        let _ = rx.handle_mad(&mad[..cut]);
        while let Some(out) = rx.poll_transmit() {
            let r = rmpp::Repr::parse_mad(&out).expect("a whole MAD");
            assert!(r.is_active());
            assert!(
                matches!(r.rmpp_type, RmppType::Ack | RmppType::Abort),
                "receiver sent {r:?}"
            );
            assert_eq!(out[8..16], mad[8..16], "answer to another TID");
        }
        if genuine && rx.state() == &ReceiverState::Complete {
            assert_eq!(rx.payload(), Some(&payload[..]));
        }
    }
});
