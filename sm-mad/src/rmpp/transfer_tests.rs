//! Whole transfers, sender and receiver in one thread over a lossy, duplicating, reordering
//! link driven by a seeded generator, in virtual time.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::*;
use crate::mad::Method;
use crate::{Error, RmppError, Tid, sa};

/// splitmix64: small, seeded, good enough to schedule faults.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn percent(&mut self, p: u32) -> bool {
        self.next() % 100 < p as u64
    }
}

/// Per-MAD fault rates, in percent.
#[derive(Debug, Clone, Copy)]
struct Faults {
    loss: u32,
    dup: u32,
    reorder: u32,
}

/// Puts `mad` on a link, perhaps losing, doubling or slipping it ahead of others.
fn put(rng: &mut Rng, f: Faults, link: &mut VecDeque<[u8; MAD_LEN]>, mad: [u8; MAD_LEN]) {
    if rng.percent(f.loss) {
        return;
    }
    let copies = if rng.percent(f.dup) { 2 } else { 1 };
    for _ in 0..copies {
        if !link.is_empty() && rng.percent(f.reorder) {
            let at = rng.below(link.len());
            link.insert(at, mad);
        } else {
            link.push_back(mad);
        }
    }
}

fn payload(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng(seed ^ 0x5eed);
    (0..len).map(|_| rng.next() as u8).collect()
}

fn template(tid: u64) -> sa::Repr {
    let mut t = sa::Repr::request(Method::GetTable, Tid(tid), 0x11, 1).response(Default::default());
    t.attribute_offset = 14;
    t
}

struct Outcome {
    sender: SenderState,
    receiver: ReceiverState,
    payload: Option<Vec<u8>>,
    /// Go-backs the sender needed.
    timeouts: u32,
}

/// Runs one transfer of `data` to its end (or `max_steps`).
fn run(
    seed: u64,
    data: &[u8],
    window: u32,
    to_receiver: Faults,
    to_sender: Faults,
    max_retries: u32,
) -> Outcome {
    let mut rng = Rng(seed);
    let mut now = Instant::now();
    let seg = Segmenter::sa(&template(seed), data.to_vec()).unwrap();
    let config = SenderConfig {
        ack_timeout: Duration::from_millis(100),
        max_retries,
        initial_window: 1,
    };
    let mut tx = RmppSender::new(seg, config, now);
    let mut rx = RmppReceiver::new(ReceiverConfig {
        window,
        ..ReceiverConfig::default()
    })
    .unwrap();
    let mut down = VecDeque::new();
    let mut up = VecDeque::new();
    let mut timeouts = 0;
    for _ in 0..1_000_000 {
        while let Some(m) = tx.poll_transmit() {
            put(&mut rng, to_receiver, &mut down, m);
        }
        while let Some(m) = rx.poll_transmit() {
            put(&mut rng, to_sender, &mut up, m);
        }
        let pick_down = match (down.is_empty(), up.is_empty()) {
            (true, true) => {
                let Some(t) = tx.poll_timeout() else { break };
                now = now.max(t);
                tx.handle_timeout(now);
                timeouts += 1;
                continue;
            }
            (false, true) => true,
            (true, false) => false,
            (false, false) => rng.percent(50),
        };
        if pick_down {
            let m = down.pop_front().unwrap();
            match rx.handle_mad(&m) {
                Ok(()) | Err(Error::Rmpp(RmppError::OutOfOrder { .. })) => {}
                // The sender gave up and said so.
                Err(Error::Rmpp(RmppError::Aborted(_))) => assert!(tx.is_finished()),
                Err(e) => panic!("receiver: {e}"),
            }
        } else {
            let m = up.pop_front().unwrap();
            tx.handle_mad(now, &m).unwrap();
        }
    }
    Outcome {
        sender: tx.state().clone(),
        receiver: rx.state().clone(),
        payload: rx.take_payload(),
        timeouts,
    }
}

fn check(seed: u64, len: usize, window: u32, down: Faults, up: Faults) -> u32 {
    let data = payload(len, seed);
    let out = run(seed, &data, window, down, up, 10_000);
    assert_eq!(out.sender, SenderState::Done, "seed {seed} len {len}");
    assert_eq!(
        out.receiver,
        ReceiverState::Complete,
        "seed {seed} len {len}"
    );
    assert!(
        out.payload.as_deref() == Some(&data[..]),
        "seed {seed} len {len}"
    );
    out.timeouts
}

const CLEAN: Faults = Faults {
    loss: 0,
    dup: 0,
    reorder: 0,
};

#[test]
fn clean_link() {
    for len in [0, 1, 199, 200, 201, 400, 4000, 20_000] {
        for window in [1, 2, 7, 64] {
            assert_eq!(check(len as u64, len, window, CLEAN, CLEAN), 0);
        }
    }
}

#[test]
fn faulty_links_many_seeds() {
    let bad = Faults {
        loss: 15,
        dup: 10,
        reorder: 20,
    };
    let mut timeouts = 0;
    for seed in 0..300u64 {
        let len = [0, 150, 200, 950, 3000, 12_345][seed as usize % 6];
        let window = [1, 3, 8, 32][seed as usize % 4];
        timeouts += check(seed, len, window, bad, bad);
    }
    assert!(timeouts > 300, "the faults did bite: {timeouts} go-backs");
}

#[test]
fn heavy_loss_still_converges() {
    let awful = Faults {
        loss: 45,
        dup: 30,
        reorder: 50,
    };
    for seed in 1000..1040u64 {
        assert!(check(seed, 5000, 4, awful, awful) > 0);
    }
}

#[test]
fn silent_receiver_makes_the_sender_give_up() {
    let deaf = Faults {
        loss: 100,
        dup: 0,
        reorder: 0,
    };
    let data = payload(1000, 3);
    let out = run(3, &data, 4, CLEAN, deaf, 5);
    assert_eq!(
        out.sender,
        SenderState::Failed(RmppError::TooManyRetries(5))
    );
    // The ABORT reached the receiver.
    assert_eq!(out.receiver, ReceiverState::Failed(RmppError::Aborted(126)));
    assert!(out.payload.is_none());
}

#[test]
fn receiver_abort_stops_the_sender() {
    let data = payload(3000, 9);
    let mut now = Instant::now();
    let seg = Segmenter::sa(&template(9), data).unwrap();
    let mut tx = RmppSender::new(seg, SenderConfig::default(), now);
    let mut rx = RmppReceiver::sa();
    rx.handle_mad(&tx.poll_transmit().unwrap()).unwrap();
    tx.handle_mad(now, &rx.poll_transmit().unwrap()).unwrap();
    rx.abort(RmppStatus::TotalTimeTooLong);
    now += Duration::from_millis(1);
    let e = tx.handle_mad(now, &rx.poll_transmit().unwrap());
    assert_eq!(e, Err(Error::Rmpp(RmppError::Aborted(118))));
    assert_eq!(tx.state(), &SenderState::Failed(RmppError::Aborted(118)));
    assert!(tx.poll_transmit().is_none());
    assert_eq!(tx.poll_timeout(), None);
}

fn faults() -> impl Strategy<Value = Faults> {
    (0u32..40, 0u32..30, 0u32..50).prop_map(|(loss, dup, reorder)| Faults { loss, dup, reorder })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn any_faults_any_size(
        seed in any::<u64>(),
        len in 0usize..6000,
        window in 1u32..20,
        down in faults(),
        up in faults(),
    ) {
        check(seed, len, window, down, up);
    }
}

/// RMPP headers, mostly plausible (version 1, known types, small numbers), sometimes not.
fn rmpp_header() -> impl Strategy<Value = [u8; 12]> {
    (
        prop_oneof![4 => Just(1u8), 1 => any::<u8>()],
        prop_oneof![4 => 1u8..=4, 1 => any::<u8>()],
        any::<u8>(),
        prop_oneof![4 => Just(0u8), 1 => any::<u8>()],
        prop_oneof![4 => 0u32..20, 1 => any::<u32>()],
        prop_oneof![4 => 0u32..4000, 1 => any::<u32>()],
    )
        .prop_map(|(v, t, f, st, d1, d2)| {
            let mut h = [0u8; 12];
            h[..4].copy_from_slice(&[v, t, f, st]);
            h[4..8].copy_from_slice(&d1.to_be_bytes());
            h[8..].copy_from_slice(&d2.to_be_bytes());
            h
        })
}

/// A MAD of the transfer with an arbitrary RMPP header and data.
fn noisy(base: &[u8; MAD_LEN], rmpp: [u8; 12], data_byte: u8) -> [u8; MAD_LEN] {
    let mut m = *base;
    m[OFFSET..HEADER_END].copy_from_slice(&rmpp);
    m[sa::HEADER_LEN..].fill(data_byte);
    m
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_headers_never_panic(
        headers in proptest::collection::vec((rmpp_header(), any::<u8>()), 1..40),
        len in 0usize..3000,
    ) {
        let seg = Segmenter::sa(&template(5), payload(len, 5)).unwrap();
        let first = seg.segment(1).unwrap();
        let now = Instant::now();
        let mut tx = RmppSender::new(seg, SenderConfig::default(), now);
        let mut rx = RmppReceiver::sa();
        let _ = rx.handle_mad(&first);
        for (h, d) in headers {
            let m = noisy(&first, h, d);
            let _ = rx.handle_mad(&m);
            let mut back = m;
            back[3] ^= 0x80;
            let _ = tx.handle_mad(now, &back);
            while rx.poll_transmit().is_some() {}
            while tx.poll_transmit().is_some() {}
            if let Some(t) = tx.poll_timeout() {
                tx.handle_timeout(t);
            }
        }
    }
}
