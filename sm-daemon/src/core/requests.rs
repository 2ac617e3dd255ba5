//! Outstanding SMPs: a bounded window, a deadline and a retry budget per request, keyed by
//! the low 32 bits of the TID (which survive every kernel's rewriting of the high half).
//!
//! There is no backlog here: the core fills the window from its work (discovery's queue,
//! the programming cursor) only while [`Requests::has_room`], so a sweep that sends
//! millions of Sets never holds more than the window's worth of encoded MADs.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::time::Duration;

use sm_mad::{Lid, Tid, mad};

use super::time::Instant;

/// A MAD to put on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transmit {
    /// LRH destination: permissive for directed route.
    pub dlid: Lid,
    /// The MAD: 256 bytes, or longer for an SA table answer the kernel segments (RMPP
    /// done by the transport; see [`crate::sa::RmppMode`]).
    pub mad: Vec<u8>,
    /// A request that expects an answer (the kernel transport needs a timeout for it).
    pub expects_response: bool,
    /// For a GSI MAD (an SA answer): the requester's QP, SL and P_Key index, which the
    /// kernel transport puts in the umad header. `None` for SMPs (QP0).
    pub gsi: Option<crate::sa::Requester>,
}

#[derive(Debug)]
struct Pending<P> {
    purpose: P,
    dlid: Lid,
    mad: [u8; 256],
    /// When it was queued (the deadline of a shell on virtual time counts from then).
    queued_at: Instant,
    /// Set when the transport takes it; `None` while it waits in `out`.
    deadline: Option<Instant>,
    tries_left: u32,
}

/// Counters of what went on the wire.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct MadCounts {
    pub sent: u64,
    pub retried: u64,
    /// Requests that exhausted their retries.
    pub lost: u64,
}

impl std::ops::Sub for MadCounts {
    type Output = MadCounts;
    fn sub(self, o: MadCounts) -> MadCounts {
        MadCounts {
            sent: self.sent - o.sent,
            retried: self.retried - o.retried,
            lost: self.lost - o.lost,
        }
    }
}

/// The request table.
#[derive(Debug)]
pub(crate) struct Requests<P> {
    window: usize,
    timeout: Duration,
    next_tid: u32,
    inflight: HashMap<u32, Pending<P>>,
    deadlines: BTreeSet<(Instant, u32)>,
    out: VecDeque<Transmit>,
    pub(crate) counts: MadCounts,
}

fn stamp(mad: &mut [u8; 256], tid: Tid) {
    mad::field::TID.set(mad, tid);
}

impl<P> Requests<P> {
    pub(crate) fn new(window: usize, timeout: Duration) -> Self {
        Requests {
            window: window.max(1),
            timeout: timeout.max(Duration::from_nanos(1)),
            next_tid: 1,
            inflight: HashMap::new(),
            deadlines: BTreeSet::new(),
            out: VecDeque::new(),
            counts: MadCounts::default(),
        }
    }

    /// A fresh TID (low 32 bits; 0 is never used).
    pub(crate) fn tid(&mut self) -> Tid {
        let t = self.next_tid;
        self.next_tid = self.next_tid.wrapping_add(1).max(1);
        Tid(t as u64)
    }

    /// Whether another request may go out now.
    pub(crate) fn has_room(&self) -> bool {
        self.inflight.len() < self.window
    }

    /// Sends a request (its TID is stamped here) with `retries` tries after the first.
    pub(crate) fn send(
        &mut self,
        now: Instant,
        purpose: P,
        dlid: Lid,
        mut mad: [u8; 256],
        retries: u32,
    ) {
        let tid = self.tid();
        stamp(&mut mad, tid);
        self.launch(now, tid.low32(), purpose, dlid, mad, retries);
    }

    fn launch(
        &mut self,
        now: Instant,
        tid: u32,
        purpose: P,
        dlid: Lid,
        mad: [u8; 256],
        tries_left: u32,
    ) {
        self.out.push_back(Transmit {
            dlid,
            mad: mad.to_vec(),
            expects_response: true,
            gsi: None,
        });
        self.inflight.insert(
            tid,
            Pending {
                purpose,
                dlid,
                mad,
                queued_at: now,
                deadline: None,
                tries_left,
            },
        );
    }

    /// The request an answer belongs to, removed from the table.
    pub(crate) fn complete(&mut self, tid: Tid) -> Option<P> {
        let p = self.inflight.remove(&tid.low32())?;
        if let Some(d) = p.deadline {
            self.deadlines.remove(&(d, tid.low32()));
        }
        Some(p.purpose)
    }

    /// Retries or gives up every request whose deadline passed; returns the given-up ones.
    pub(crate) fn expire(&mut self, now: Instant) -> Vec<P> {
        let mut lost = Vec::new();
        while let Some(&(deadline, tid)) = self.deadlines.first() {
            if deadline > now {
                break;
            }
            self.deadlines.pop_first();
            let Some(p) = self.inflight.remove(&tid) else {
                continue;
            };
            if p.tries_left > 0 {
                self.counts.retried += 1;
                tracing::debug!(tid, "SMP timed out; retrying");
                // A new TID per attempt: a late answer to the old one is then ignored.
                let new = self.tid();
                let mut mad = p.mad;
                stamp(&mut mad, new);
                self.launch(now, new.low32(), p.purpose, p.dlid, mad, p.tries_left - 1);
            } else {
                self.counts.lost += 1;
                lost.push(p.purpose);
            }
        }
        lost
    }

    /// A MAD that expects no answer (responses, TrapRepress, traps).
    pub(crate) fn send_unsolicited(&mut self, dlid: Lid, mad: [u8; 256]) {
        self.out.push_back(Transmit {
            dlid,
            mad: mad.to_vec(),
            expects_response: false,
            gsi: None,
        });
    }

    /// The next MAD for the transport; a request's deadline counts from when it was
    /// queued (a shell on virtual time, where queueing and sending are the same instant).
    pub(crate) fn poll_transmit(&mut self) -> Option<Transmit> {
        self.take(None)
    }

    /// Like `poll_transmit`, for a shell on a real clock: a request's deadline then counts
    /// from `now`, when it is handed to the transport, not from when the core queued it (a
    /// long computation in between, such as routing, would otherwise expire it unsent).
    pub(crate) fn poll_transmit_at(&mut self, now: Instant) -> Option<Transmit> {
        self.take(Some(now))
    }

    fn take(&mut self, now: Option<Instant>) -> Option<Transmit> {
        let t = self.out.pop_front()?;
        self.counts.sent += 1;
        if t.expects_response {
            let tid = mad::peek_tid(&t.mad).map_or(0, Tid::low32);
            if let Some(p) = self.inflight.get_mut(&tid) {
                let deadline = now.unwrap_or(p.queued_at) + self.timeout;
                p.deadline = Some(deadline);
                self.deadlines.insert((deadline, tid));
            }
        }
        Some(t)
    }

    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.first().map(|d| d.0)
    }

    /// Requests in flight.
    pub(crate) fn in_flight(&self) -> usize {
        self.inflight.len()
    }

    /// Forgets everything outstanding (a new sweep starts over). What the transport has
    /// not taken yet is dropped too.
    pub(crate) fn clear(&mut self) {
        self.inflight.clear();
        self.deadlines.clear();
        self.out.retain(|t| !t.expects_response);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ns: u64) -> Instant {
        Instant::from_nanos(ns)
    }

    fn tid_of(t: &Transmit) -> Tid {
        mad::field::TID.get(&t.mad)
    }

    #[test]
    fn window_retry_and_loss() {
        let mut r: Requests<u32> = Requests::new(2, Duration::from_nanos(100));
        r.send(at(0), 0, Lid(1), [0; 256], 1);
        r.send(at(0), 1, Lid(1), [0; 256], 1);
        assert!(!r.has_room(), "window of 2");
        let a = r.poll_transmit().unwrap();
        let b = r.poll_transmit().unwrap();
        assert_eq!(r.complete(tid_of(&a)), Some(0));
        assert!(r.has_room());
        r.send(at(10), 2, Lid(1), [0; 256], 1);
        assert!(r.poll_transmit().is_some(), "the third goes out");
        // b times out: one retry with a new TID, then lost.
        assert!(r.expire(at(100)).is_empty());
        assert_eq!(r.counts.retried, 1);
        assert!(r.poll_transmit().is_some(), "b's retry");
        assert_eq!(r.complete(tid_of(&b)), None, "old TID no longer matches");
        // b's retry is lost; c (sent at 10) gets its one retry.
        assert_eq!(r.expire(at(1_000)), vec![1]);
        assert!(r.poll_transmit().is_some(), "c's retry");
        assert_eq!(r.expire(at(2_000)), vec![2]);
        assert_eq!(r.counts.sent, 5);
        assert_eq!(r.counts.lost, 2);
        assert_eq!(r.in_flight(), 0);
    }

    #[test]
    fn deadline_counts_from_hand_over() {
        let mut r: Requests<u32> = Requests::new(4, Duration::from_nanos(100));
        r.send(at(0), 1, Lid(1), [0; 256], 0);
        // Handed to the transport only at 500 (the core was busy in between).
        let t = r.poll_transmit_at(at(500)).unwrap();
        assert_eq!(r.next_deadline(), Some(at(600)));
        assert!(r.expire(at(550)).is_empty());
        assert_eq!(r.complete(tid_of(&t)), Some(1));
    }
}
