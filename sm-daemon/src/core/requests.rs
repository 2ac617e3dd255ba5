//! Outstanding SMPs: a bounded window, and per request its tries, each with a deadline and a
//! TID of its own (the low 32 bits, which survive every kernel's rewriting of the high half).
//!
//! There is no backlog here: the core fills the window from its work (discovery's queue,
//! the programming cursor) only while [`Requests::has_room`], so a sweep that sends
//! millions of Sets never holds more than the window's worth of encoded MADs.
//!
//! Timeouts adapt to what the fabric answers. Each destination (a node, or the unknown node
//! behind a port) keeps a smoothed round trip and its variation, as TCP does (RFC 6298);
//! a try waits that estimate (the fabric-wide one for a destination not heard from yet, the
//! configured timeout before anything was heard at all), and each retry twice the last. Every
//! try's TID stays valid until the request ends, so a slow agent's late answer to an early try
//! still completes it; one that comes after the request was given up still teaches its
//! destination how slow it is. A destination that lets a run of tries go unanswered
//! (its budget) is unresponsive: its requests are given up at once and new ones get a single
//! try, until it answers again.

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

/// Who a request is for: a node by GUID, the unknown node behind a port, a LID.
pub(crate) type DestKey = u64;

/// The shortest wait for a try (a fabric that answers in microseconds still gets this long).
const MIN_TIMEOUT: Duration = Duration::from_millis(10);
/// A try never waits longer than this many configured timeouts.
const MAX_BACKOFF: u32 = 8;
/// Unanswered tries after which a destination that never answered is unresponsive: four
/// requests' worth of tries at the default three retries, so at 20 % loss each way a node
/// that answers is taken for dead about once in 10^7 sweeps, while a silent one costs two
/// passes of waiting.
const DEST_BUDGET: u32 = 16;
/// Given-up tries remembered for their late answers.
const LATE_MEMORY: usize = 4096;

/// A smoothed round-trip estimate (RFC 6298).
#[derive(Debug, Clone, Copy, Default)]
struct Rtt {
    srtt: Duration,
    rttvar: Duration,
    samples: u32,
}

impl Rtt {
    fn sample(&mut self, r: Duration) {
        if self.samples == 0 {
            self.srtt = r;
            self.rttvar = r / 2;
        } else {
            let diff = self.srtt.abs_diff(r);
            self.rttvar = (self.rttvar * 3 + diff) / 4;
            self.srtt = (self.srtt * 7 + r) / 8;
        }
        self.samples = self.samples.saturating_add(1);
    }

    fn timeout(&self) -> Option<Duration> {
        (self.samples > 0).then(|| self.srtt + self.rttvar * 4)
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Dest {
    rtt: Rtt,
    /// Tries that went unanswered since its last answer.
    misses: u32,
    last_answer: Option<Instant>,
}

#[derive(Debug)]
struct Pending<P> {
    purpose: P,
    dest: DestKey,
    dlid: Lid,
    mad: [u8; 256],
    /// When the current try was queued (its deadline counts from then on a virtual clock).
    queued_at: Instant,
    /// The current try's wait; its deadline is set when the transport takes it.
    wait: Duration,
    deadline: Option<Instant>,
    tries_left: u32,
    /// Every try: its TID and when it left (`None` while queued).
    tries: Vec<(u32, Option<Instant>)>,
}

/// The request table.
#[derive(Debug)]
pub(crate) struct Requests<P> {
    window: usize,
    /// The configured timeout: the first wait before anything was heard, and the unit of
    /// the longest backoff.
    timeout: Duration,
    next_tid: u32,
    next_id: u64,
    pending: HashMap<u64, Pending<P>>,
    /// The latest time the table was told.
    clock: Instant,
    /// Every live try's TID and its request.
    by_tid: HashMap<u32, u64>,
    deadlines: BTreeSet<(Instant, u64)>,
    dests: HashMap<DestKey, Dest>,
    fabric: Rtt,
    /// Tries of given-up requests: TID -> (destination, sent at).
    late: HashMap<u32, (DestKey, Instant)>,
    late_order: VecDeque<u32>,
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
            next_id: 0,
            pending: HashMap::new(),
            clock: Instant::ZERO,
            by_tid: HashMap::new(),
            deadlines: BTreeSet::new(),
            dests: HashMap::new(),
            fabric: Rtt::default(),
            late: HashMap::new(),
            late_order: VecDeque::new(),
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
        self.pending.len() < self.window
    }

    /// Whether `dest` let its budget of tries go unanswered and has not answered for as
    /// long as the longest wait (many requests lost at once to a destination that answers
    /// others is a lossy path, not a dead node).
    pub(crate) fn is_unresponsive_at(&self, dest: DestKey, now: Instant) -> bool {
        self.dests.get(&dest).is_some_and(|d| {
            d.misses >= DEST_BUDGET
                && d.last_answer
                    .is_none_or(|a| now.saturating_duration_since(a) > self.timeout * MAX_BACKOFF)
        })
    }

    /// [`Requests::is_unresponsive_at`] as of the last thing heard or given up.
    pub(crate) fn is_unresponsive(&self, dest: DestKey) -> bool {
        self.is_unresponsive_at(dest, self.clock)
    }

    /// Forgets which destinations were unresponsive (their round trips are kept): a new
    /// sweep tries them again.
    pub(crate) fn forgive(&mut self) {
        for d in self.dests.values_mut() {
            d.misses = 0;
        }
    }

    /// How long the first try to `dest` waits.
    fn first_wait(&self, dest: DestKey) -> Duration {
        let est = self
            .dests
            .get(&dest)
            .and_then(|d| d.rtt.timeout())
            .or_else(|| self.fabric.timeout());
        match est {
            Some(t) => t.max(MIN_TIMEOUT.min(self.timeout)),
            None => self.timeout,
        }
    }

    /// Sends a request for `dest` (its TID is stamped here) with `retries` tries after the
    /// first; an unresponsive destination gets one try.
    pub(crate) fn send(
        &mut self,
        now: Instant,
        purpose: P,
        dest: DestKey,
        dlid: Lid,
        mad: [u8; 256],
        retries: u32,
    ) {
        self.clock = self.clock.max(now);
        let tries_left = if self.is_unresponsive(dest) {
            0
        } else {
            retries
        };
        let id = self.next_id;
        self.next_id += 1;
        let wait = self.first_wait(dest);
        self.pending.insert(
            id,
            Pending {
                purpose,
                dest,
                dlid,
                mad,
                queued_at: now,
                wait,
                deadline: None,
                tries_left,
                tries: Vec::new(),
            },
        );
        self.launch(now, id);
    }

    /// Queues the next try of request `id` under a new TID.
    fn launch(&mut self, now: Instant, id: u64) {
        let tid = self.tid();
        let Some(p) = self.pending.get_mut(&id) else {
            return;
        };
        stamp(&mut p.mad, tid);
        p.queued_at = now;
        p.deadline = None;
        p.tries.push((tid.low32(), None));
        self.by_tid.insert(tid.low32(), id);
        self.out.push_back(Transmit {
            dlid: p.dlid,
            mad: p.mad.to_vec(),
            expects_response: true,
            gsi: None,
        });
    }

    /// The request an answer belongs to (an answer to any of its tries), removed from the
    /// table; the answer teaches its destination's round trip.
    pub(crate) fn complete(&mut self, now: Instant, tid: Tid) -> Option<P> {
        self.clock = self.clock.max(now);
        let tid = tid.low32();
        let Some(id) = self.by_tid.remove(&tid) else {
            if let Some((dest, sent)) = self.late.remove(&tid) {
                // Too late for its request, not for learning how slow its sender is.
                self.learn(dest, now, now.saturating_duration_since(sent));
            }
            return None;
        };
        let p = self.pending.remove(&id)?;
        if let Some(d) = p.deadline {
            self.deadlines.remove(&(d, id));
        }
        for &(t, _) in &p.tries {
            self.by_tid.remove(&t);
        }
        if let Some(sent) = p.tries.iter().find(|t| t.0 == tid).and_then(|t| t.1) {
            self.learn(p.dest, now, now.saturating_duration_since(sent));
        }
        Some(p.purpose)
    }

    fn learn(&mut self, dest: DestKey, now: Instant, rtt: Duration) {
        let d = self.dests.entry(dest).or_default();
        d.rtt.sample(rtt);
        d.misses = 0;
        d.last_answer = Some(now);
        self.fabric.sample(rtt);
    }

    /// Retries or gives up every request whose try timed out; returns the given-up ones.
    pub(crate) fn expire(&mut self, now: Instant) -> Vec<P> {
        self.clock = self.clock.max(now);
        let mut lost = Vec::new();
        while let Some(&(deadline, id)) = self.deadlines.first() {
            if deadline > now {
                break;
            }
            self.deadlines.pop_first();
            let Some(p) = self.pending.get_mut(&id) else {
                continue;
            };
            p.deadline = None;
            let dest = p.dest;
            let d = self.dests.entry(dest).or_default();
            d.misses = d.misses.saturating_add(1);
            let unresponsive = self.is_unresponsive_at(dest, now);
            let Some(p) = self.pending.get_mut(&id) else {
                continue;
            };
            if p.tries_left > 0 && !unresponsive {
                p.tries_left -= 1;
                p.wait = (p.wait * 2).min(self.timeout * MAX_BACKOFF);
                self.counts.retried += 1;
                tracing::trace!(id, "SMP timed out; retrying");
                self.launch(now, id);
            } else if let Some(p) = self.give_up(id) {
                lost.push(p);
            }
        }
        // An unresponsive destination's other requests end now, not one timeout each.
        let mut dead: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, p)| p.deadline.is_some() && self.is_unresponsive_at(p.dest, now))
            .map(|(&id, _)| id)
            .collect();
        // In the order they were sent, not the map's: what is asked again next, and so
        // a run, must not depend on hashing.
        dead.sort_unstable();
        for id in dead {
            if let Some(p) = self.give_up(id) {
                lost.push(p);
            }
        }
        lost
    }

    /// Ends the requests `drop` picks without waiting for them: nothing more is learnt
    /// from their silence, and an answer that still comes is taken as late.
    pub(crate) fn abandon(&mut self, drop: impl Fn(&P) -> bool) -> Vec<P> {
        let mut ids: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, p)| drop(&p.purpose))
            .map(|(&id, _)| id)
            .collect();
        ids.sort_unstable();
        ids.into_iter().filter_map(|id| self.end(id)).collect()
    }

    fn give_up(&mut self, id: u64) -> Option<P> {
        let p = self.end(id)?;
        self.counts.lost += 1;
        Some(p)
    }

    /// Removes request `id`, keeping its tries' TIDs for late answers.
    fn end(&mut self, id: u64) -> Option<P> {
        let p = self.pending.remove(&id)?;
        if let Some(d) = p.deadline {
            self.deadlines.remove(&(d, id));
        }
        for (t, sent) in p.tries {
            self.by_tid.remove(&t);
            if let Some(sent) = sent {
                self.late.insert(t, (p.dest, sent));
                self.late_order.push_back(t);
            }
        }
        while self.late_order.len() > LATE_MEMORY {
            if let Some(t) = self.late_order.pop_front() {
                self.late.remove(&t);
            }
        }
        Some(p.purpose)
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
            if let Some(&id) = self.by_tid.get(&tid) {
                if let Some(p) = self.pending.get_mut(&id) {
                    let sent = now.unwrap_or(p.queued_at);
                    if let Some(slot) = p.tries.iter_mut().find(|x| x.0 == tid) {
                        slot.1 = Some(sent);
                    }
                    let deadline = sent + p.wait;
                    p.deadline = Some(deadline);
                    self.deadlines.insert((deadline, id));
                }
            }
        }
        Some(t)
    }

    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.first().map(|d| d.0)
    }

    /// Requests in flight.
    pub(crate) fn in_flight(&self) -> usize {
        self.pending.len()
    }

    /// Forgets everything outstanding (a new sweep starts over). What the transport has
    /// not taken yet is dropped too.
    pub(crate) fn clear(&mut self) {
        self.pending.clear();
        self.by_tid.clear();
        self.deadlines.clear();
        self.out.retain(|t| !t.expects_response);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }

    fn tid_of(t: &Transmit) -> Tid {
        mad::field::TID.get(&t.mad)
    }

    const T: Duration = Duration::from_millis(100);

    #[test]
    fn window_retry_and_loss() {
        let mut r: Requests<u32> = Requests::new(2, T);
        r.send(at(0), 0, 1, Lid(1), [0; 256], 1);
        r.send(at(0), 1, 1, Lid(1), [0; 256], 1);
        assert!(!r.has_room(), "window of 2");
        let a = r.poll_transmit().unwrap();
        let b = r.poll_transmit().unwrap();
        assert_eq!(r.complete(at(5), tid_of(&a)), Some(0));
        assert!(r.has_room());
        // Heard from in 5 ms: the next request's first try waits the estimate, at least
        // the floor.
        r.send(at(10), 2, 1, Lid(1), [0; 256], 0);
        let c = r.poll_transmit().unwrap();
        // c had no retry: lost at 10 + max(5 + 4 * 2.5, 10) = 25 ms.
        assert_eq!(r.expire(at(24)), Vec::<u32>::new());
        assert_eq!(r.expire(at(25)), vec![2]);
        // b (first try: the configured 100 ms) times out and goes again with twice the wait.
        assert!(r.expire(at(99)).is_empty());
        assert!(r.expire(at(100)).is_empty());
        assert_eq!(r.counts.retried, 1);
        let b2 = r.poll_transmit().unwrap();
        assert_ne!(tid_of(&b), tid_of(&b2));
        // A late answer to b's first try still completes b.
        assert_eq!(r.complete(at(150), tid_of(&b)), Some(1));
        assert_eq!(r.complete(at(151), tid_of(&b2)), None, "b is done");
        assert_eq!((r.counts.sent, r.counts.lost), (4, 1));
        assert_eq!(r.in_flight(), 0);
        // c's late answer is learned from: its destination is slow, not gone.
        assert_eq!(r.complete(at(60), tid_of(&c)), None);
        assert!(r.first_wait(1) > Duration::from_millis(25));
    }

    #[test]
    fn an_abandoned_request_ends_uncounted_and_its_answer_is_late() {
        let mut r: Requests<u32> = Requests::new(4, T);
        r.send(at(0), 1, 7, Lid(1), [0; 256], 2);
        r.send(at(0), 2, 8, Lid(1), [0; 256], 2);
        let a = r.poll_transmit().unwrap();
        let _ = r.poll_transmit().unwrap();
        assert_eq!(r.abandon(|&p| p == 1), vec![1]);
        assert_eq!(r.in_flight(), 1);
        assert_eq!(r.counts.lost, 0, "not lost: given up by choice");
        assert_eq!(r.complete(at(3), tid_of(&a)), None, "late");
        assert!(
            r.expire(at(99)).is_empty(),
            "no retry of what was abandoned"
        );
        assert_eq!(
            r.expire(at(100)),
            Vec::<u32>::new(),
            "the other one retries"
        );
        assert_eq!(r.counts.retried, 1);
    }

    #[test]
    fn deadline_counts_from_hand_over() {
        let mut r: Requests<u32> = Requests::new(4, T);
        r.send(at(0), 1, 7, Lid(1), [0; 256], 0);
        // Handed to the transport only at 500 ms (the core was busy in between).
        let t = r.poll_transmit_at(at(500)).unwrap();
        assert_eq!(r.next_deadline(), Some(at(600)));
        assert!(r.expire(at(550)).is_empty());
        assert_eq!(r.complete(at(560), tid_of(&t)), Some(1));
    }

    #[test]
    fn a_silent_destination_is_given_up_at_once() {
        let mut r: Requests<u32> = Requests::new(64, T);
        for i in 0..20 {
            r.send(at(0), i, 9, Lid(9), [0; 256], 3);
        }
        while r.poll_transmit().is_some() {}
        let mut lost = Vec::new();
        let mut now = 0;
        while r.in_flight() > 0 && now < 20_000 {
            now += 10;
            lost.extend(r.expire(at(now)));
            while r.poll_transmit().is_some() {}
        }
        assert_eq!(lost.len(), 20);
        assert!(r.is_unresponsive(9));
        // Far fewer tries than 20 requests x 4.
        assert!(r.counts.sent < 60, "{}", r.counts.sent);
        // Once unresponsive, one try each; an answer makes it responsive again.
        r.send(at(now), 99, 9, Lid(9), [0; 256], 3);
        let t = r.poll_transmit().unwrap();
        assert_eq!(r.complete(at(now + 1), tid_of(&t)), Some(99));
        assert!(!r.is_unresponsive(9));
    }
}
