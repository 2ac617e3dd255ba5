//! Outstanding SMPs: a bounded window, a backlog behind it, a deadline and a retry budget
//! per request. Keyed by the low 32 bits of the TID, which survive every kernel's rewriting.

use std::collections::{BTreeSet, HashMap, VecDeque};

use sm_mad::{Lid, Tid};

use super::Nanos;

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
    deadline: Nanos,
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

/// The request table.
#[derive(Debug)]
pub(crate) struct Requests<P> {
    window: usize,
    timeout: Nanos,
    retries: u32,
    next_tid: u32,
    inflight: HashMap<u32, Pending<P>>,
    deadlines: BTreeSet<(Nanos, u32)>,
    /// Requests waiting for room in the window, each with its retry budget.
    backlog: VecDeque<(P, Lid, [u8; 256], u32)>,
    out: VecDeque<Transmit>,
    pub(crate) counts: MadCounts,
}

impl<P> Requests<P> {
    pub(crate) fn new(window: usize, timeout: Nanos, retries: u32) -> Self {
        Requests {
            window: window.max(1),
            timeout: timeout.max(1),
            retries,
            next_tid: 1,
            inflight: HashMap::new(),
            deadlines: BTreeSet::new(),
            backlog: VecDeque::new(),
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

    /// Queues a request; `stamp` writes the TID into the MAD.
    pub(crate) fn submit(&mut self, now: Nanos, purpose: P, dlid: Lid, mad: [u8; 256]) {
        self.submit_with(now, purpose, dlid, mad, self.retries);
    }

    /// Like [`Requests::submit`], with its own number of retries (0: one try).
    pub(crate) fn submit_with(
        &mut self,
        now: Nanos,
        purpose: P,
        dlid: Lid,
        mad: [u8; 256],
        retries: u32,
    ) {
        self.backlog.push_back((purpose, dlid, mad, retries));
        self.pump(now);
    }

    /// Sends from the backlog while the window has room.
    fn pump(&mut self, now: Nanos) {
        while self.inflight.len() < self.window {
            let Some((purpose, dlid, mut mad, retries)) = self.backlog.pop_front() else {
                break;
            };
            let tid = self.tid();
            mad[8..16].copy_from_slice(&tid.0.to_be_bytes());
            self.launch(now, tid.low32(), purpose, dlid, mad, retries);
        }
    }

    fn launch(
        &mut self,
        now: Nanos,
        tid: u32,
        purpose: P,
        dlid: Lid,
        mad: [u8; 256],
        tries_left: u32,
    ) {
        let deadline = now + self.timeout;
        self.out.push_back(Transmit {
            dlid,
            mad: mad.to_vec(),
            expects_response: true,
            gsi: None,
        });
        self.counts.sent += 1;
        self.deadlines.insert((deadline, tid));
        self.inflight.insert(
            tid,
            Pending {
                purpose,
                dlid,
                mad,
                deadline,
                tries_left,
            },
        );
    }

    /// The request an answer belongs to, removed from the table.
    pub(crate) fn complete(&mut self, now: Nanos, tid: Tid) -> Option<P> {
        let p = self.inflight.remove(&tid.low32())?;
        self.deadlines.remove(&(p.deadline, tid.low32()));
        self.pump(now);
        Some(p.purpose)
    }

    /// Retries or gives up every request whose deadline passed; returns the given-up ones.
    pub(crate) fn expire(&mut self, now: Nanos) -> Vec<P> {
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
                tracing::debug!(tid, deadline, now, "SMP timed out; retrying");
                // A new TID per attempt: a late answer to the old one is then ignored.
                let new = self.tid();
                let mut mad = p.mad;
                mad[8..16].copy_from_slice(&new.0.to_be_bytes());
                self.launch(now, new.low32(), p.purpose, p.dlid, mad, p.tries_left - 1);
            } else {
                self.counts.lost += 1;
                lost.push(p.purpose);
            }
        }
        self.pump(now);
        lost
    }

    /// A MAD that expects no answer (responses, TrapRepress).
    pub(crate) fn send_unsolicited(&mut self, dlid: Lid, mad: [u8; 256]) {
        self.counts.sent += 1;
        self.out.push_back(Transmit {
            dlid,
            mad: mad.to_vec(),
            expects_response: false,
            gsi: None,
        });
    }

    pub(crate) fn poll_transmit(&mut self) -> Option<Transmit> {
        self.out.pop_front()
    }

    /// Like `poll_transmit`, for a shell on a real clock: a request's deadline then counts
    /// from `now`, when it is handed to the transport, not from when the core queued it (a
    /// long computation in between, such as routing, would otherwise expire it unsent).
    pub(crate) fn poll_transmit_at(&mut self, now: Nanos) -> Option<Transmit> {
        let t = self.out.pop_front()?;
        if t.expects_response {
            let tid = t
                .mad
                .get(12..16)
                .and_then(|b| <[u8; 4]>::try_from(b).ok())
                .map_or(0, u32::from_be_bytes);
            let fresh = now.saturating_add(self.timeout);
            if let Some(p) = self.inflight.get_mut(&tid) {
                if p.deadline < fresh {
                    self.deadlines.remove(&(p.deadline, tid));
                    self.deadlines.insert((fresh, tid));
                    p.deadline = fresh;
                }
            }
        }
        Some(t)
    }

    pub(crate) fn next_deadline(&self) -> Option<Nanos> {
        self.deadlines.first().map(|d| d.0)
    }

    /// Requests in flight or waiting.
    pub(crate) fn busy(&self) -> usize {
        self.inflight.len() + self.backlog.len()
    }

    /// Forgets everything outstanding (a new sweep starts over).
    pub(crate) fn clear(&mut self) {
        self.inflight.clear();
        self.deadlines.clear();
        self.backlog.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_retry_and_loss() {
        let mut r: Requests<u32> = Requests::new(2, 100, 1);
        for i in 0..3 {
            r.submit(0, i, Lid(1), [0; 256]);
        }
        assert_eq!(r.busy(), 3);
        let a = r.poll_transmit().unwrap();
        let b = r.poll_transmit().unwrap();
        assert!(r.poll_transmit().is_none(), "window of 2");
        let tid_a = Tid(u64::from_be_bytes(a.mad[8..16].try_into().unwrap()));
        assert_eq!(r.complete(10, tid_a), Some(0));
        assert!(r.poll_transmit().is_some(), "the third goes out");
        // b times out: one retry with a new TID, then lost.
        let tid_b = Tid(u64::from_be_bytes(b.mad[8..16].try_into().unwrap()));
        assert!(r.expire(100).is_empty());
        assert_eq!(r.counts.retried, 1);
        assert_eq!(r.complete(150, tid_b), None, "old TID no longer matches");
        // b's retry is lost; c (sent at 10) gets its one retry.
        assert_eq!(r.expire(1_000), vec![1]);
        assert_eq!(r.expire(2_000), vec![2]);
        assert_eq!(r.counts.lost, 2);
        assert_eq!(r.busy(), 0);
    }

    #[test]
    fn deadline_counts_from_hand_over() {
        let mut r: Requests<u32> = Requests::new(4, 100, 0);
        r.submit(0, 1, Lid(1), [0; 256]);
        // Handed to the transport only at 500 (the core was busy in between).
        let t = r.poll_transmit_at(500).unwrap();
        let tid = Tid(u64::from_be_bytes(t.mad[8..16].try_into().unwrap()));
        assert_eq!(r.next_deadline(), Some(600));
        assert!(r.expire(550).is_empty());
        assert_eq!(r.complete(560, tid), Some(1));
    }
}
