//! The sending side of a transfer: windowed DATA, ACK processing, retransmission.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::{Repr, RmppStatus, RmppType, Segmenter, VERSION, control};
use crate::{MAD_LEN, Result, RmppError, Tid, mad};

/// A point in time the sender's timer can be armed at: [`Instant`] for a shell on a real
/// clock, or nanoseconds (`u64`) of whatever clock a sans-IO caller runs on, virtual time
/// included. Only comparisons and adding the ACK timeout are needed.
pub trait Timestamp: Copy + Ord + core::fmt::Debug {
    /// This time plus `d` (saturating where the type can).
    fn plus(self, d: Duration) -> Self;
}

impl Timestamp for Instant {
    fn plus(self, d: Duration) -> Self {
        self + d
    }
}

impl Timestamp for u64 {
    fn plus(self, d: Duration) -> Self {
        self.saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }
}

/// Sender tunables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SenderConfig {
    /// How long to wait for an ACK that moves the transfer on before going back to the first
    /// unacknowledged segment. The Linux MAD layer waits 2 s.
    pub ack_timeout: Duration,
    /// Timeouts in a row without progress before the transfer is aborted.
    pub max_retries: u32,
    /// The last segment the receiver may be sent before its first ACK (the specification
    /// and Linux start at 1).
    pub initial_window: u32,
}

impl Default for SenderConfig {
    fn default() -> Self {
        SenderConfig {
            ack_timeout: Duration::from_secs(2),
            max_retries: 3,
            initial_window: 1,
        }
    }
}

/// Where a sender stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SenderState {
    /// Segments remain unacknowledged.
    Sending,
    /// The receiver acknowledged the last segment.
    Done,
    /// The transfer ended early: the peer stopped or aborted it, or it broke the protocol,
    /// or it stopped answering.
    Failed(RmppError),
}

/// A sans-IO RMPP sender. Feed it the peer's MADs ([`handle_mad`](Self::handle_mad)) and the
/// expiry of its timer ([`handle_timeout`](Self::handle_timeout)); drain
/// [`poll_transmit`](Self::poll_transmit) after each call and arm a timer for
/// [`poll_timeout`](Self::poll_timeout).
#[derive(Debug, Clone)]
pub struct RmppSender<T: Timestamp = Instant> {
    seg: Segmenter,
    config: SenderConfig,
    tid: Tid,
    class: u8,
    /// Highest segment the receiver acknowledged.
    last_ack: u32,
    /// Highest segment the receiver allows.
    window_last: u32,
    /// Next segment `poll_transmit` renders.
    next: u32,
    retries: u32,
    deadline: Option<T>,
    control: VecDeque<[u8; MAD_LEN]>,
    state: SenderState,
}

impl<T: Timestamp> RmppSender<T> {
    /// Starts sending `seg` at `now`.
    pub fn new(seg: Segmenter, config: SenderConfig, now: T) -> RmppSender<T> {
        // The segmenter guarantees the header spans the MAD and RMPP headers.
        let tid = mad::field::TID.get(seg.header());
        let class = mad::field::MGMT_CLASS.get(seg.header()).to_raw_value();
        RmppSender {
            window_last: config.initial_window.max(1),
            seg,
            config,
            tid,
            class,
            last_ack: 0,
            next: 1,
            retries: 0,
            deadline: Some(now.plus(config.ack_timeout)),
            control: VecDeque::new(),
            state: SenderState::Sending,
        }
    }

    /// The transfer's state.
    pub fn state(&self) -> &SenderState {
        &self.state
    }

    /// Done or failed.
    pub fn is_finished(&self) -> bool {
        self.state != SenderState::Sending
    }

    /// The TID the transfer runs under.
    pub fn tid(&self) -> Tid {
        self.tid
    }

    /// The segments of the transfer.
    pub fn segmenter(&self) -> &Segmenter {
        &self.seg
    }

    /// Highest segment acknowledged so far.
    pub fn last_ack(&self) -> u32 {
        self.last_ack
    }

    /// When [`handle_timeout`](Self::handle_timeout) is due.
    pub fn poll_timeout(&self) -> Option<T> {
        self.deadline
    }

    /// The next MAD to send, if any: an ABORT, or a DATA segment inside the window.
    pub fn poll_transmit(&mut self) -> Option<[u8; MAD_LEN]> {
        if let Some(m) = self.control.pop_front() {
            return Some(m);
        }
        if self.state != SenderState::Sending {
            return None;
        }
        if self.next > self.window_last.min(self.seg.count()) {
            return None;
        }
        let m = self.seg.segment(self.next).ok()?;
        self.next += 1;
        Some(m)
    }

    /// The timer fired: go back to the first unacknowledged segment, or give up.
    pub fn handle_timeout(&mut self, now: T) {
        if self.state != SenderState::Sending || self.deadline.is_none_or(|d| now < d) {
            return;
        }
        if self.retries >= self.config.max_retries {
            self.fail(RmppError::TooManyRetries(self.retries), true);
            return;
        }
        self.retries += 1;
        self.next = self.last_ack + 1;
        self.deadline = Some(now.plus(self.config.ack_timeout));
    }

    /// The peer sent `mad` (ACK, STOP or ABORT) for this transfer. A MAD of another transfer
    /// is an error that changes nothing; a protocol violation fails the transfer and queues
    /// an ABORT.
    pub fn handle_mad(&mut self, now: T, mad: &[u8]) -> Result<()> {
        let hdr = mad::Repr::parse(mad)?;
        if hdr.tid != self.tid || hdr.mgmt_class.to_raw_value() != self.class {
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
        if self.state != SenderState::Sending {
            return Ok(());
        }
        if r.rmpp_version != VERSION {
            return Err(self.fail(RmppError::BadVersion(r.rmpp_version), true));
        }
        match r.rmpp_type {
            RmppType::Ack => self.on_ack(now, &r),
            RmppType::Stop => {
                let e = if r.rmpp_status == RmppStatus::ResourcesExhausted {
                    self.fail(RmppError::Stopped(r.rmpp_status.to_raw_value()), false)
                } else {
                    self.fail(RmppError::IllegalStatus(r.rmpp_status.to_raw_value()), true)
                };
                Err(e)
            }
            RmppType::Abort => {
                let e = if r.rmpp_status.is_abort() {
                    self.fail(RmppError::Aborted(r.rmpp_status.to_raw_value()), false)
                } else {
                    self.fail(RmppError::IllegalStatus(r.rmpp_status.to_raw_value()), true)
                };
                Err(e)
            }
            other => Err(self.fail(RmppError::BadType(other.to_raw_value()), true)),
        }
    }

    fn on_ack(&mut self, now: T, r: &Repr) -> Result<()> {
        if r.rmpp_status != RmppStatus::Normal {
            return Err(self.fail(RmppError::IllegalStatus(r.rmpp_status.to_raw_value()), true));
        }
        let seg = r.segment_number();
        let nwl = r.new_window_last();
        if nwl < seg {
            return Err(self.fail(
                RmppError::WindowTooSmall {
                    segment: seg,
                    new_window_last: nwl,
                },
                true,
            ));
        }
        if seg > self.seg.count() || seg > self.window_last {
            return Err(self.fail(RmppError::TooManySegments(seg), true));
        }
        if nwl < self.window_last || seg < self.last_ack {
            return Ok(()); // an old ACK, overtaken
        }
        if seg > self.last_ack {
            self.last_ack = seg;
            self.retries = 0;
            self.deadline = Some(now.plus(self.config.ack_timeout));
        }
        self.window_last = nwl;
        // A go-back may have rewound below what is now acknowledged.
        self.next = self.next.max(self.last_ack + 1);
        if self.last_ack == self.seg.count() {
            self.state = SenderState::Done;
            self.deadline = None;
        }
        Ok(())
    }

    /// Ends the transfer with `err`, queueing an ABORT when the peer is to be told.
    fn fail(&mut self, err: RmppError, tell: bool) -> crate::Error {
        if let (true, Some(status)) = (tell, err.abort_status()) {
            // Sent as our DATA is: the method unchanged.
            if let Ok(m) = control(
                self.seg.header(),
                Repr::abort(RmppType::Abort, status),
                false,
            ) {
                self.control.push_back(m);
            }
        }
        self.state = SenderState::Failed(err.clone());
        self.deadline = None;
        err.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::Method;
    use crate::rmpp::RmppFlags;
    use crate::{Error, sa};

    fn sender(len: usize, window: u32) -> (RmppSender, Instant) {
        let t =
            sa::Repr::request(Method::GetTable, Tid(0x77), 0x11, 0).response(Default::default());
        let now = Instant::now();
        let cfg = SenderConfig {
            initial_window: window,
            ..SenderConfig::default()
        };
        (
            RmppSender::new(Segmenter::sa(&t, vec![3; len]).unwrap(), cfg, now),
            now,
        )
    }

    fn drain(s: &mut RmppSender) -> Vec<Repr> {
        std::iter::from_fn(|| s.poll_transmit())
            .map(|m| Repr::parse_mad(&m).unwrap())
            .collect()
    }

    /// A control MAD from the receiver: the sender's header, method flipped, `rmpp`.
    fn from_peer(s: &RmppSender, rmpp: Repr) -> [u8; MAD_LEN] {
        control(s.segmenter().header(), rmpp, true).unwrap()
    }

    #[test]
    fn windowed_sending_and_completion() {
        let (mut s, t0) = sender(1000, 1); // 5 segments
        assert_eq!(drain(&mut s).len(), 1);
        s.handle_mad(t0, &from_peer(&s, Repr::ack(1, 3))).unwrap();
        let segs: Vec<u32> = drain(&mut s).iter().map(Repr::segment_number).collect();
        assert_eq!(segs, [2, 3]);
        s.handle_mad(t0, &from_peer(&s, Repr::ack(3, 10))).unwrap();
        let segs = drain(&mut s);
        assert_eq!(segs.len(), 2);
        assert!(segs[1].rmpp_flags.contains(RmppFlags::LAST));
        assert_eq!(s.state(), &SenderState::Sending);
        s.handle_mad(t0, &from_peer(&s, Repr::ack(5, 10))).unwrap();
        assert_eq!(s.state(), &SenderState::Done);
        assert_eq!(s.poll_timeout(), None);
        // Late duplicates change nothing.
        s.handle_mad(t0, &from_peer(&s, Repr::ack(5, 10))).unwrap();
        assert!(s.poll_transmit().is_none());
    }

    #[test]
    fn timeout_goes_back_and_old_acks_are_ignored() {
        let (mut s, t0) = sender(1000, 4);
        assert_eq!(drain(&mut s).len(), 4);
        s.handle_mad(t0, &from_peer(&s, Repr::ack(2, 4))).unwrap();
        assert!(drain(&mut s).is_empty());
        // Too early: nothing.
        s.handle_timeout(t0 + Duration::from_millis(10));
        assert!(drain(&mut s).is_empty());
        let t1 = s.poll_timeout().unwrap();
        s.handle_timeout(t1);
        let segs: Vec<u32> = drain(&mut s).iter().map(Repr::segment_number).collect();
        assert_eq!(segs, [3, 4]);
        // An ACK older than the last one is ignored.
        s.handle_mad(t1, &from_peer(&s, Repr::ack(1, 4))).unwrap();
        assert_eq!(s.last_ack(), 2);
    }

    #[test]
    fn virtual_time_in_nanoseconds() {
        let t = sa::Repr::request(Method::GetTable, Tid(9), 0x11, 0).response(Default::default());
        let seg = Segmenter::sa(&t, vec![1; 500]).unwrap();
        let mut s: RmppSender<u64> = RmppSender::new(seg, SenderConfig::default(), 1_000);
        assert_eq!(s.poll_timeout(), Some(2_000_001_000));
        assert_eq!(drain_u64(&mut s), 1);
        s.handle_timeout(2_000_000_999);
        assert_eq!(drain_u64(&mut s), 0, "not yet due");
        s.handle_timeout(2_000_001_000);
        assert_eq!(drain_u64(&mut s), 1, "segment 1 again");
        assert_eq!(u64::MAX.plus(Duration::from_secs(1)), u64::MAX);
    }

    fn drain_u64(s: &mut RmppSender<u64>) -> usize {
        std::iter::from_fn(|| s.poll_transmit()).count()
    }

    #[test]
    fn gives_up_after_retries() {
        let (mut s, _) = sender(10, 1);
        drain(&mut s);
        for _ in 0..3 {
            let t = s.poll_timeout().unwrap();
            s.handle_timeout(t);
            assert_eq!(drain(&mut s).len(), 1);
        }
        let t = s.poll_timeout().unwrap();
        s.handle_timeout(t);
        assert_eq!(
            s.state(),
            &SenderState::Failed(RmppError::TooManyRetries(3))
        );
        let abort = s.poll_transmit().unwrap();
        assert_eq!(abort[3], 0x92, "an ABORT goes out with the DATA's method");
        let r = Repr::parse_mad(&abort).unwrap();
        assert_eq!(r.rmpp_type, RmppType::Abort);
        assert_eq!(r.rmpp_status, RmppStatus::TooManyRetries);
        assert!(s.poll_transmit().is_none());
    }

    fn fails_with(rmpp: Repr, want: RmppError, abort: Option<RmppStatus>) {
        let (mut s, t0) = sender(1000, 2);
        drain(&mut s);
        let e = s.handle_mad(t0, &from_peer(&s, rmpp)).unwrap_err();
        assert_eq!(e, Error::Rmpp(want.clone()));
        assert_eq!(s.state(), &SenderState::Failed(want));
        let sent = drain(&mut s);
        match abort {
            Some(st) => {
                assert_eq!(sent.len(), 1);
                assert_eq!(sent[0].rmpp_type, RmppType::Abort);
                assert_eq!(sent[0].rmpp_status, st);
            }
            None => assert!(sent.is_empty()),
        }
    }

    #[test]
    fn peer_stop_and_abort() {
        fails_with(
            Repr::abort(RmppType::Stop, RmppStatus::ResourcesExhausted),
            RmppError::Stopped(1),
            None,
        );
        fails_with(
            Repr::abort(RmppType::Stop, RmppStatus::TooManyRetries),
            RmppError::IllegalStatus(126),
            Some(RmppStatus::IllegalStatus),
        );
        fails_with(
            Repr::abort(RmppType::Abort, RmppStatus::TotalTimeTooLong),
            RmppError::Aborted(118),
            None,
        );
        fails_with(
            Repr::abort(RmppType::Abort, RmppStatus::ResourcesExhausted),
            RmppError::IllegalStatus(1),
            Some(RmppStatus::IllegalStatus),
        );
    }

    #[test]
    fn bad_acks() {
        fails_with(
            Repr::ack(2, 1),
            RmppError::WindowTooSmall {
                segment: 2,
                new_window_last: 1,
            },
            Some(RmppStatus::NewWindowLastTooSmall),
        );
        fails_with(
            Repr::ack(3, 4),
            RmppError::TooManySegments(3),
            Some(RmppStatus::SegmentNumberTooBig),
        );
        fails_with(
            Repr::ack(9, 9),
            RmppError::TooManySegments(9),
            Some(RmppStatus::SegmentNumberTooBig),
        );
        let mut bad = Repr::ack(1, 2);
        bad.rmpp_status = RmppStatus::Unspecified;
        fails_with(
            bad,
            RmppError::IllegalStatus(127),
            Some(RmppStatus::IllegalStatus),
        );
        let mut v2 = Repr::ack(1, 2);
        v2.rmpp_version = 2;
        fails_with(
            v2,
            RmppError::BadVersion(2),
            Some(RmppStatus::UnsupportedVersion),
        );
        fails_with(
            Repr::data(1, RmppFlags::FIRST, 0),
            RmppError::BadType(1),
            Some(RmppStatus::BadRmppType),
        );
    }

    #[test]
    fn foreign_mads_change_nothing() {
        let (mut s, t0) = sender(1000, 2);
        drain(&mut s);
        let mut other = from_peer(&s, Repr::ack(1, 2));
        other[15] ^= 1;
        assert_eq!(
            s.handle_mad(t0, &other),
            Err(Error::Rmpp(RmppError::WrongTransfer {
                expected: 0x77,
                got: 0x76
            }))
        );
        let inactive = from_peer(&s, Repr::default());
        assert_eq!(
            s.handle_mad(t0, &inactive),
            Err(Error::Rmpp(RmppError::NotActive))
        );
        assert!(s.handle_mad(t0, &inactive[..20]).is_err());
        assert_eq!(s.state(), &SenderState::Sending);
        assert!(drain(&mut s).is_empty());
    }
}
