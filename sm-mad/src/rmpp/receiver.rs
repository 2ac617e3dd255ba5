//! The receiving side of a transfer: in-order reassembly and ACKs.

use std::collections::VecDeque;

use super::{HEADER_END, Repr, RmppStatus, RmppType, SEGMENT_PAYLOAD, VERSION, control};
use crate::{Error, MAD_LEN, Result, RmppError, Tid, mad, sa};

/// Receiver tunables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReceiverConfig {
    /// Segments granted per ACK: each window-boundary ACK moves the sender's window this far.
    pub window: u32,
    /// Largest transfer accepted, in segments (bounds memory).
    pub max_segments: u32,
    /// Bytes each segment repeats before its data: 56 for SA.
    pub header_len: usize,
}

impl Default for ReceiverConfig {
    fn default() -> Self {
        ReceiverConfig {
            window: 64,
            max_segments: 1 << 16,
            header_len: sa::HEADER_LEN,
        }
    }
}

/// Where a receiver stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReceiverState {
    /// No first segment yet.
    Waiting,
    /// Segments are arriving.
    Receiving,
    /// The last segment arrived; the payload is ready. Duplicates are still acknowledged.
    Complete,
    /// The transfer ended early.
    Failed(RmppError),
}

/// A sans-IO RMPP receiver for one transfer. Feed it every MAD of the transfer
/// ([`handle_mad`](Self::handle_mad)) and drain [`poll_transmit`](Self::poll_transmit)
/// after each call. Segments are accepted in order only: one out of order is dropped and the
/// last in-order segment acknowledged again, so the sender goes back to it.
#[derive(Debug, Clone)]
pub struct RmppReceiver {
    config: ReceiverConfig,
    header: [u8; MAD_LEN],
    /// The first segment arrived: the transfer's identity is known.
    started: bool,
    tid: Tid,
    class: u8,
    class_version: u8,
    method: u8,
    /// Next segment number accepted.
    expected: u32,
    window_last: u32,
    /// Segments announced by the first segment's payload length (0 when not announced).
    total: u32,
    first_length: u32,
    payload: Vec<u8>,
    control: VecDeque<[u8; MAD_LEN]>,
    state: ReceiverState,
}

impl RmppReceiver {
    /// A receiver waiting for its first segment.
    pub fn new(config: ReceiverConfig) -> Result<RmppReceiver> {
        let bad = |field, value| Error::InvalidField {
            what: "RMPP receiver",
            field,
            value,
        };
        if config.window == 0 {
            return Err(bad("window", 0));
        }
        if !(HEADER_END..MAD_LEN).contains(&config.header_len) {
            return Err(bad("header_len", config.header_len as u64));
        }
        Ok(RmppReceiver::with(config))
    }

    /// An SA receiver with the default tunables.
    pub fn sa() -> RmppReceiver {
        RmppReceiver::with(ReceiverConfig::default())
    }

    fn with(config: ReceiverConfig) -> RmppReceiver {
        RmppReceiver {
            config,
            header: [0; MAD_LEN],
            started: false,
            tid: Tid(0),
            class: 0,
            class_version: 0,
            method: 0,
            expected: 1,
            window_last: 1,
            total: 0,
            first_length: 0,
            payload: Vec::new(),
            control: VecDeque::new(),
            state: ReceiverState::Waiting,
        }
    }

    /// The transfer's state.
    pub fn state(&self) -> &ReceiverState {
        &self.state
    }

    /// The TID of the transfer (once its first segment arrived).
    pub fn tid(&self) -> Tid {
        self.tid
    }

    /// The first segment's header (MAD, RMPP and class headers), once it arrived.
    pub fn header(&self) -> Option<&[u8]> {
        self.started
            .then_some(&self.header[..self.config.header_len])
    }

    /// The reassembled payload (the data after the class header of every segment, without
    /// the pad), once complete.
    pub fn payload(&self) -> Option<&[u8]> {
        (self.state == ReceiverState::Complete).then_some(&self.payload[..])
    }

    /// Takes the reassembled payload out; the receiver keeps acknowledging duplicates.
    pub fn take_payload(&mut self) -> Option<Vec<u8>> {
        (self.state == ReceiverState::Complete).then(|| core::mem::take(&mut self.payload))
    }

    /// The next MAD to send: an ACK or an ABORT.
    pub fn poll_transmit(&mut self) -> Option<[u8; MAD_LEN]> {
        self.control.pop_front()
    }

    /// Abandons the transfer (for example when it takes too long: status 118), telling the
    /// sender with an ABORT of `status`.
    pub fn abort(&mut self, status: RmppStatus) {
        if matches!(self.state, ReceiverState::Receiving) {
            if let Ok(m) = control(
                &self.header[..self.config.header_len],
                Repr::abort(RmppType::Abort, status),
                true,
            ) {
                self.control.push_back(m);
            }
        }
        self.payload = Vec::new();
        self.state = ReceiverState::Failed(RmppError::Cancelled(status.to_raw_value()));
    }

    /// The peer sent `mad`, a whole MAD of this transfer. A MAD of another transfer is an
    /// error that changes nothing; a protocol violation fails the transfer and queues an
    /// ABORT.
    pub fn handle_mad(&mut self, mad: &[u8]) -> Result<()> {
        let got = mad.len();
        if got < MAD_LEN {
            return Err(Error::Truncated {
                what: "RMPP segment",
                need: MAD_LEN,
                got,
            });
        }
        let mad = &mad[..MAD_LEN];
        let hdr = mad::Repr::parse(mad)?;
        if self.started
            && (hdr.tid != self.tid
                || hdr.mgmt_class.to_raw_value() != self.class
                || hdr.class_version != self.class_version
                || hdr.method.to_raw_value() != self.method)
        {
            return Err(RmppError::WrongTransfer {
                expected: self.tid.0,
                got: hdr.tid.0,
            }
            .into());
        }
        let r = Repr::parse_mad(mad)?;
        if !r.is_active() {
            return Err(RmppError::NotActive.into());
        }
        if matches!(self.state, ReceiverState::Failed(_)) {
            return Ok(());
        }
        if r.rmpp_version != VERSION {
            return Err(self.fail(mad, RmppError::BadVersion(r.rmpp_version), true));
        }
        match r.rmpp_type {
            RmppType::Data => self.on_data(mad, &r),
            RmppType::Abort if r.rmpp_status.is_abort() => {
                let e = RmppError::Aborted(r.rmpp_status.to_raw_value());
                Err(self.fail(mad, e, false))
            }
            RmppType::Abort => {
                let e = RmppError::IllegalStatus(r.rmpp_status.to_raw_value());
                Err(self.fail(mad, e, true))
            }
            other => Err(self.fail(mad, RmppError::BadType(other.to_raw_value()), true)),
        }
    }

    fn on_data(&mut self, mad: &[u8], r: &Repr) -> Result<()> {
        if r.rmpp_status != RmppStatus::Normal {
            let e = RmppError::IllegalStatus(r.rmpp_status.to_raw_value());
            return Err(self.fail(mad, e, true));
        }
        let seg = r.segment_number();
        if (seg == 1) != r.rmpp_flags.first() {
            return Err(self.fail(mad, RmppError::BadFirst(seg), true));
        }
        if self.state == ReceiverState::Waiting {
            if seg != 1 {
                // Nothing to acknowledge yet: the sender's timer will resend segment 1.
                return Err(RmppError::OutOfOrder {
                    expected: 1,
                    got: seg,
                }
                .into());
            }
            self.start(mad, r)?;
        }
        if seg > self.config.max_segments || (self.total != 0 && seg > self.total) {
            return Err(self.fail(mad, RmppError::TooManySegments(seg), true));
        }
        if seg > self.window_last {
            return Ok(()); // beyond what we allowed: drop without a word
        }
        if seg != self.expected || self.state == ReceiverState::Complete {
            // A duplicate, or a gap: say again how far we are.
            self.ack(mad);
            return Ok(());
        }
        let data_len = MAD_LEN - self.config.header_len;
        self.payload
            .extend_from_slice(&mad[self.config.header_len..]);
        self.expected = self.expected.saturating_add(1);
        if r.rmpp_flags.last() {
            return self.finish(mad, r, seg, data_len);
        }
        if self.total == seg {
            let e = RmppError::BadLength {
                payload: self.first_length,
                segments: seg,
            };
            return Err(self.fail(mad, e, true));
        }
        if seg == self.window_last {
            self.window_last = self.window_last.saturating_add(self.config.window);
            self.ack(mad);
        }
        Ok(())
    }

    fn start(&mut self, mad: &[u8], r: &Repr) -> Result<()> {
        let h = self.config.header_len;
        self.header[..h].copy_from_slice(&mad[..h]);
        self.tid = mad::field::TID.get(mad);
        self.class = mad[1];
        self.class_version = mad[2];
        self.method = mad[3];
        self.started = true;
        self.first_length = r.payload_length();
        self.total = self.first_length.div_ceil(SEGMENT_PAYLOAD as u32);
        self.state = ReceiverState::Receiving;
        if self.total > self.config.max_segments {
            let e = RmppError::TooManySegments(self.total);
            return Err(self.fail(mad, e, true));
        }
        let per = MAD_LEN - h;
        self.payload = Vec::with_capacity(self.total.max(1) as usize * per);
        Ok(())
    }

    fn finish(&mut self, mad: &[u8], r: &Repr, seg: u32, data_len: usize) -> Result<()> {
        let class_header = (self.config.header_len - HEADER_END) as u32;
        let last = r.payload_length();
        let whole = (seg as u64 - 1) * SEGMENT_PAYLOAD as u64 + last as u64;
        let bad_last = last < class_header || last as usize > SEGMENT_PAYLOAD;
        if bad_last || (self.first_length != 0 && self.first_length as u64 != whole) {
            let e = RmppError::BadLength {
                payload: if bad_last { last } else { self.first_length },
                segments: seg,
            };
            return Err(self.fail(mad, e, true));
        }
        let pad = data_len - (last - class_header) as usize;
        self.payload.truncate(self.payload.len() - pad);
        self.state = ReceiverState::Complete;
        self.ack(mad);
        Ok(())
    }

    /// Queues an ACK of the last in-order segment.
    fn ack(&mut self, mad: &[u8]) {
        let rmpp = Repr::ack(self.expected - 1, self.window_last);
        if let Ok(m) = control(&mad[..self.config.header_len], rmpp, true) {
            self.control.push_back(m);
        }
    }

    /// Ends the transfer with `err`, queueing an ABORT when the peer is to be told.
    fn fail(&mut self, mad: &[u8], err: RmppError, tell: bool) -> Error {
        if let (true, Some(status)) = (tell, err.abort_status()) {
            let abort = Repr::abort(RmppType::Abort, status);
            if let Ok(m) = control(&mad[..self.config.header_len], abort, true) {
                self.control.push_back(m);
            }
        }
        self.payload = Vec::new();
        self.state = ReceiverState::Failed(err.clone());
        err.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::Method;
    use crate::rmpp::{RmppFlags, Segmenter};

    fn segments(len: usize) -> Vec<[u8; MAD_LEN]> {
        let t =
            sa::Repr::request(Method::GetTable, Tid(0x99), 0x11, 0).response(Default::default());
        let payload: Vec<u8> = (0..len).map(|i| i as u8).collect();
        Segmenter::sa(&t, payload).unwrap().segments().collect()
    }

    fn receiver(window: u32) -> RmppReceiver {
        RmppReceiver::new(ReceiverConfig {
            window,
            ..ReceiverConfig::default()
        })
        .unwrap()
    }

    fn sent(r: &mut RmppReceiver) -> Vec<Repr> {
        std::iter::from_fn(|| r.poll_transmit())
            .map(|m| {
                assert_eq!(m[3], 0x12, "answers flip GetTableResp to GetTable");
                Repr::parse_mad(&m).unwrap()
            })
            .collect()
    }

    #[test]
    fn in_order_with_window_acks() {
        let segs = segments(1000); // 5 segments
        let mut r = receiver(2);
        r.handle_mad(&segs[0]).unwrap();
        assert_eq!(sent(&mut r), [Repr::ack(1, 3)]);
        r.handle_mad(&segs[1]).unwrap();
        assert!(sent(&mut r).is_empty());
        r.handle_mad(&segs[2]).unwrap();
        assert_eq!(sent(&mut r), [Repr::ack(3, 5)]);
        r.handle_mad(&segs[3]).unwrap();
        assert!(r.payload().is_none());
        r.handle_mad(&segs[4]).unwrap();
        assert_eq!(sent(&mut r), [Repr::ack(5, 5)]);
        assert_eq!(r.state(), &ReceiverState::Complete);
        let want: Vec<u8> = (0..1000).map(|i| i as u8).collect();
        assert_eq!(r.payload().unwrap(), &want[..]);
        assert_eq!(r.header().unwrap()[..4], [1, 3, 2, 0x92]);
        // A late duplicate is acknowledged again.
        r.handle_mad(&segs[2]).unwrap();
        assert_eq!(sent(&mut r), [Repr::ack(5, 5)]);
        assert_eq!(r.take_payload().unwrap(), want);
    }

    #[test]
    fn gaps_and_duplicates_reack() {
        let segs = segments(1000);
        let mut r = receiver(8);
        r.handle_mad(&segs[0]).unwrap();
        sent(&mut r);
        r.handle_mad(&segs[2]).unwrap(); // gap
        assert_eq!(sent(&mut r), [Repr::ack(1, 9)]);
        r.handle_mad(&segs[0]).unwrap(); // duplicate
        assert_eq!(sent(&mut r), [Repr::ack(1, 9)]);
        for s in &segs[1..] {
            r.handle_mad(s).unwrap();
        }
        assert_eq!(sent(&mut r), [Repr::ack(5, 9)]);
        assert_eq!(r.payload().unwrap().len(), 1000);
    }

    #[test]
    fn beyond_window_is_dropped_silently() {
        let segs = segments(1000);
        let mut r = receiver(1);
        r.handle_mad(&segs[0]).unwrap();
        assert_eq!(sent(&mut r), [Repr::ack(1, 2)]);
        r.handle_mad(&segs[2]).unwrap();
        assert!(sent(&mut r).is_empty());
    }

    #[test]
    fn single_and_empty() {
        for len in [0, 1, 199, 200] {
            let segs = segments(len);
            assert_eq!(segs.len(), 1);
            let mut r = RmppReceiver::sa();
            r.handle_mad(&segs[0]).unwrap();
            assert_eq!(sent(&mut r), [Repr::ack(1, 1)], "as Linux: no window move");
            assert_eq!(r.payload().unwrap().len(), len);
        }
    }

    #[test]
    fn unannounced_length() {
        // A first segment may leave payload_length 0.
        let mut segs = segments(450);
        segs[0][32..36].copy_from_slice(&[0; 4]);
        let mut r = receiver(4);
        for s in &segs {
            r.handle_mad(s).unwrap();
        }
        assert_eq!(r.payload().unwrap().len(), 450);
    }

    /// Feeds `segs` in order; the last one must fail with `want` and an ABORT of `status`
    /// (or none).
    fn fails_with(segs: &[[u8; MAD_LEN]], want: RmppError, status: Option<RmppStatus>) {
        let mut r = receiver(8);
        let (last, init) = segs.split_last().unwrap();
        for s in init {
            r.handle_mad(s).unwrap();
        }
        sent(&mut r);
        assert_eq!(r.handle_mad(last), Err(Error::Rmpp(want.clone())));
        assert_eq!(r.state(), &ReceiverState::Failed(want));
        let out = sent(&mut r);
        match status {
            Some(st) => {
                assert_eq!(out.len(), 1);
                assert_eq!(out[0].rmpp_type, RmppType::Abort);
                assert_eq!(out[0].rmpp_status, st);
                assert_eq!((out[0].data1, out[0].data2), (0, 0));
            }
            None => assert!(out.is_empty()),
        }
        // Later MADs of the transfer are ignored.
        assert_eq!(r.handle_mad(&segs[0]), Ok(()));
        assert!(sent(&mut r).is_empty());
    }

    fn with(seg: [u8; MAD_LEN], f: impl FnOnce(&mut Repr)) -> [u8; MAD_LEN] {
        let mut m = seg;
        let mut r = Repr::parse_mad(&m).unwrap();
        f(&mut r);
        r.emit_mad(&mut m).unwrap();
        m
    }

    #[test]
    fn bad_first_segment() {
        let s = segments(450);
        let no_first = with(s[0], |r| r.rmpp_flags = RmppFlags::ACTIVE);
        fails_with(
            &[no_first],
            RmppError::BadFirst(1),
            Some(RmppStatus::InconsistentFirstAndSegmentNumber),
        );
        let first_again = with(s[1], |r| r.rmpp_flags = r.rmpp_flags | RmppFlags::FIRST);
        fails_with(
            &[s[0], first_again],
            RmppError::BadFirst(2),
            Some(RmppStatus::InconsistentFirstAndSegmentNumber),
        );
    }

    #[test]
    fn unsupported_version_and_type() {
        let s = segments(450);
        let v2 = with(s[0], |r| r.rmpp_version = 2);
        fails_with(
            &[v2],
            RmppError::BadVersion(2),
            Some(RmppStatus::UnsupportedVersion),
        );
        let stop = with(s[1], |r| {
            *r = Repr::abort(RmppType::Stop, RmppStatus::ResourcesExhausted)
        });
        fails_with(
            &[s[0], stop],
            RmppError::BadType(3),
            Some(RmppStatus::BadRmppType),
        );
        let odd = with(s[1], |r| r.rmpp_type = RmppType::Unknown(9));
        fails_with(
            &[s[0], odd],
            RmppError::BadType(9),
            Some(RmppStatus::BadRmppType),
        );
    }

    #[test]
    fn inconsistent_payload_length() {
        let s = segments(450);
        // The last segment claims more than a segment holds.
        let long_last = with(s[2], |r| r.data2 = 221);
        fails_with(
            &[s[0], s[1], long_last],
            RmppError::BadLength {
                payload: 221,
                segments: 3,
            },
            Some(RmppStatus::InconsistentLastAndPayloadLength),
        );
        // The last segment disagrees with the first.
        let other_last = with(s[2], |r| r.data2 = 60);
        fails_with(
            &[s[0], s[1], other_last],
            RmppError::BadLength {
                payload: 510,
                segments: 3,
            },
            Some(RmppStatus::InconsistentLastAndPayloadLength),
        );
        // The announced last segment lacks the Last flag.
        let no_last = with(s[2], |r| r.rmpp_flags = RmppFlags::ACTIVE);
        fails_with(
            &[s[0], s[1], no_last],
            RmppError::BadLength {
                payload: 510,
                segments: 3,
            },
            Some(RmppStatus::InconsistentLastAndPayloadLength),
        );
    }

    #[test]
    fn segment_number_too_big() {
        let s = segments(450);
        let far = with(s[1], |r| r.data1 = 4);
        fails_with(
            &[s[0], far],
            RmppError::TooManySegments(4),
            Some(RmppStatus::SegmentNumberTooBig),
        );
        let huge = with(s[0], |r| r.data2 = u32::MAX);
        fails_with(
            &[huge],
            RmppError::TooManySegments(u32::MAX.div_ceil(220)),
            Some(RmppStatus::SegmentNumberTooBig),
        );
    }

    #[test]
    fn illegal_status_and_peer_abort() {
        let s = segments(450);
        let st = with(s[1], |r| r.rmpp_status = RmppStatus::ResourcesExhausted);
        fails_with(
            &[s[0], st],
            RmppError::IllegalStatus(1),
            Some(RmppStatus::IllegalStatus),
        );
        let abort = with(s[1], |r| {
            *r = Repr::abort(RmppType::Abort, RmppStatus::TooManyRetries)
        });
        fails_with(&[s[0], abort], RmppError::Aborted(126), None);
        let bad_abort = with(s[1], |r| {
            *r = Repr::abort(RmppType::Abort, RmppStatus::Normal)
        });
        fails_with(
            &[s[0], bad_abort],
            RmppError::IllegalStatus(0),
            Some(RmppStatus::IllegalStatus),
        );
    }

    #[test]
    fn wrong_transfer_and_strays() {
        let s = segments(450);
        let mut r = receiver(8);
        assert_eq!(
            r.handle_mad(&s[1]),
            Err(Error::Rmpp(RmppError::OutOfOrder {
                expected: 1,
                got: 2
            }))
        );
        assert_eq!(r.state(), &ReceiverState::Waiting);
        r.handle_mad(&s[0]).unwrap();
        sent(&mut r);
        let mut other = s[1];
        other[15] = 0x98;
        assert_eq!(
            r.handle_mad(&other),
            Err(Error::Rmpp(RmppError::WrongTransfer {
                expected: 0x99,
                got: 0x98
            }))
        );
        let inactive = with(s[1], |r| r.rmpp_flags = RmppFlags::NONE);
        assert_eq!(
            r.handle_mad(&inactive),
            Err(Error::Rmpp(RmppError::NotActive))
        );
        assert!(matches!(
            r.handle_mad(&s[1][..255]),
            Err(Error::Truncated { need: 256, .. })
        ));
        assert_eq!(r.state(), &ReceiverState::Receiving);
        assert!(sent(&mut r).is_empty());
    }

    #[test]
    fn local_abort() {
        let s = segments(450);
        let mut r = receiver(8);
        r.handle_mad(&s[0]).unwrap();
        sent(&mut r);
        r.abort(RmppStatus::TotalTimeTooLong);
        let out = sent(&mut r);
        assert_eq!(out[0].rmpp_status, RmppStatus::TotalTimeTooLong);
        assert_eq!(r.state(), &ReceiverState::Failed(RmppError::Cancelled(118)));
    }

    #[test]
    fn bad_config() {
        let c = ReceiverConfig {
            window: 0,
            ..ReceiverConfig::default()
        };
        assert!(RmppReceiver::new(c).is_err());
        let c = ReceiverConfig {
            window: 1,
            header_len: 20,
            ..c
        };
        assert!(RmppReceiver::new(c).is_err());
    }
}
