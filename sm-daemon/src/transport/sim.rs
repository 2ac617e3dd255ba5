//! Drives the SM core against the in-process simulated fabric in virtual time, in one
//! thread: the core's transmits go into the fabric, the fabric's deliveries come back, and
//! time jumps to whichever deadline is next.

use sm_core::fabric::{Fabric, PortIdx};
use sm_core::lid::LidStore;
use sm_sim::{EndpointId, Sim, SimConfig};

use crate::core::{Event, Nanos, Params, Sm};

/// The SM and its fabric.
#[derive(Debug)]
pub struct SimDriver {
    pub sim: Sim,
    pub sm: Sm,
    pub ep: EndpointId,
    now: Nanos,
}

impl SimDriver {
    /// An SM attached at `sm_port` of a freshly powered simulated `fabric`.
    pub fn new(
        fabric: &Fabric,
        sm_port: PortIdx,
        params: Params,
        lids: LidStore,
        cfg: SimConfig,
    ) -> SimDriver {
        let mut sim = Sim::new(fabric, cfg);
        let ep = sim.attach(sm_port);
        SimDriver {
            sim,
            sm: Sm::new(params, lids),
            ep,
            now: 0,
        }
    }

    /// Virtual time now.
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// Moves MADs both ways and time to the next deadline. Returns false when nothing is
    /// left to do (no pending event and no core deadline).
    pub fn step(&mut self) -> bool {
        self.flush();
        let next = match (self.sim.next_event(), self.sm.poll_timeout()) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) => a,
            (None, Some(b)) => b,
            (None, None) => return false,
        };
        self.now = self.now.max(next);
        self.sim.advance(self.now);
        while let Some(m) = self.sim.recv(self.ep) {
            self.sm.handle_mad(self.now, m.slid, &m.mad);
        }
        if self.sm.poll_timeout().is_some_and(|t| t <= self.now) {
            self.sm.handle_timeout(self.now);
        }
        // What the core queued goes out now, so `next_deadline` sees it.
        self.flush();
        true
    }

    /// Hands the core's queued MADs to the fabric.
    fn flush(&mut self) {
        while let Some(t) = self.sm.poll_transmit() {
            if let Err(e) = self.sim.send(self.ep, t.dlid, &t.mad) {
                tracing::warn!("simulated fabric refused a MAD: {e}");
            }
        }
    }

    /// The next time anything is due (fabric event or core deadline).
    pub fn next_deadline(&self) -> Option<Nanos> {
        match (self.sim.next_event(), self.sm.poll_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Processes everything due up to `t` without jumping past it (real-time pacing).
    pub fn advance_to(&mut self, t: Nanos) {
        loop {
            self.flush();
            match self.next_deadline() {
                Some(next) if next <= t => {
                    self.now = self.now.max(next);
                    self.sim.advance(self.now);
                    while let Some(m) = self.sim.recv(self.ep) {
                        self.sm.handle_mad(self.now, m.slid, &m.mad);
                    }
                    if self.sm.poll_timeout().is_some_and(|d| d <= self.now) {
                        self.sm.handle_timeout(self.now);
                    }
                }
                _ => break,
            }
        }
        self.now = self.now.max(t);
        self.sim.advance(self.now);
    }

    /// Starts the SM and runs until an event satisfies `want`, or until `limit` of virtual
    /// time has passed (then `None`).
    pub fn run_until(
        &mut self,
        limit: Nanos,
        mut want: impl FnMut(&Event) -> bool,
    ) -> Option<Event> {
        let deadline = self.now + limit;
        loop {
            while let Some(e) = self.sm.poll_event() {
                if want(&e) {
                    return Some(e);
                }
            }
            if self.now > deadline || !self.step() {
                return None;
            }
        }
    }

    /// Starts the first sweep.
    pub fn start(&mut self) {
        self.sm.start(self.now);
    }
}
