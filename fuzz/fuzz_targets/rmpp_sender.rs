#![no_main]
//! An RMPP sender of a real transfer fed arbitrary answers (ACK, STOP, ABORT or anything
//! else in the RMPP header, for this TID or another) and timer expiries. It must never
//! panic and every MAD it sends must be a DATA segment of its transfer.

use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use sm_mad::rmpp::{self, RmppSender, RmppType, Segmenter, SenderConfig};
use sm_mad::{Method, Tid, sa};

fuzz_target!(|data: &[u8]| {
    let Some((head, steps)) = data.split_first_chunk::<2>() else {
        return;
    };
    let len = usize::from(u16::from_be_bytes(*head)) % 3000;
    let template =
        sa::Repr::request(Method::GetTable, Tid(0x99), 0x11, 0).response(Default::default());
    let seg = Segmenter::sa(&template, vec![0xab; len]).expect("a small payload segments");
    let first = seg.segment(1).expect("segment 1");
    let count = seg.count();
    let mut now = Instant::now();
    let mut tx = RmppSender::new(seg, SenderConfig::default(), now);
    for step in steps.chunks(14) {
        let [op, rest @ ..] = step else {
            break;
        };
        if op % 4 == 0 {
            now += Duration::from_millis(u64::from(*op));
            tx.handle_timeout(now);
        } else {
            let mut answer = first;
            answer[3] ^= 0x80; // from the other side
            let n = rest.len().min(12);
            answer[rmpp::OFFSET..rmpp::OFFSET + n].copy_from_slice(&rest[..n]);
            if op % 4 == 3 {
                answer[15] ^= 1; // another transfer
            }
            let _ = tx.handle_mad(now, &answer);
        }
        while let Some(out) = tx.poll_transmit() {
            let r = rmpp::Repr::parse_mad(&out).expect("a whole MAD");
            assert_eq!(out[8..16], first[8..16], "segment of another TID");
            if r.rmpp_type == RmppType::Data {
                assert!((1..=count).contains(&r.segment_number()), "{r:?}");
            }
        }
    }
});
