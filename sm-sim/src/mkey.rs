//! M_Key protection (IBA 14.2.4). Every CA port and every switch (its port 0 speaks for the
//! whole switch) holds an M_Key, protection bits and a lease period in its PortInfo. An SMP
//! for the agent passes when the port's M_Key is 0 or the SMP carries it; otherwise, by
//! protection level:
//!
//! | level | Get | Set, TrapRepress |
//! |---|---|---|
//! | 0 | answered | fails |
//! | 1 | answered, PortInfo.M_Key reads 0 | fails |
//! | 2 | fails | fails |
//! | 3 | fails | fails |
//!
//! (Level 3 protects like level 2, as Linux's qib and hfi1 agents and OpenSM, which caps the
//! level at 2, treat it.) A failed check drops the SMP without an answer, counts in
//! PortInfo.M_KeyViolations, starts the lease timer when it is not running and the lease
//! period is not 0 (C14-17), and sends Trap 256 (bad M_Key) to the port's master SM when
//! the port has a LID and an SM LID (at most one per trap interval). A Get, Set or TrapRepress with the right key stops
//! the timer (C14-19); when the timer runs out, the protection bits fall back to 0 (C14-18).

use sm_core::fabric::{NodeIdx, PortIdx};
use sm_mad::notice::{self, ProducerType, Trap, details_256};
use sm_mad::{Bytes, Lid, Method, Tid, mad, smp};

use crate::sim::Event;
use crate::{Drop, Sim};

/// Nanoseconds in a second: M_KeyLeasePeriod counts seconds.
const SECOND: u64 = 1_000_000_000;

impl Sim {
    /// Checks the M_Key of an SMP arriving for node `n`'s agent on port `port`. `None`:
    /// drop it (already counted and reported). `Some(hide)`: go on; `hide` says that
    /// PortInfo.M_Key must read 0 in the answer.
    pub(crate) fn m_key_check(
        &mut self,
        n: NodeIdx,
        port: PortIdx,
        mad: &[u8; 256],
        slid: Lid,
    ) -> Option<bool> {
        let key_port = if self.is_switch(n) {
            self.port_idx(n, 0).unwrap_or(port)
        } else {
            port
        };
        let kp = &self.ports[key_port.idx()];
        let key = kp.info.m_key;
        let given = smp::Packet::from(mad).get(smp::field::M_KEY);
        let method = mad::Packet::from(mad).method();
        let checked = matches!(method, Method::Get | Method::Set | Method::TrapRepress);
        if key == 0 || key == given {
            if checked && kp.lease.expires.is_some() {
                self.stop_lease(key_port);
            }
            return Some(false);
        }
        match (method, kp.info.m_key_protect_bits) {
            (Method::Get, 0) => return Some(false),
            (Method::Get, 1) => return Some(true),
            _ => {}
        }
        let port_info = &mut self.ports[key_port.idx()].info;
        port_info.m_key_violations = port_info.m_key_violations.saturating_add(1);
        let lease = port_info.m_key_lease_period;
        if lease != 0 && self.ports[key_port.idx()].lease.expires.is_none() {
            self.start_lease(key_port, lease as u64 * SECOND);
        }
        let lease = &mut self.ports[key_port.idx()].lease;
        let quiet = lease
            .last_trap
            .is_some_and(|t| self.now < t + self.cfg.trap_interval_ns);
        if !quiet {
            lease.last_trap = Some(self.now);
            self.trap_256(n, key_port, mad, slid);
        }
        self.drop_mad(Drop::BadMKey);
        None
    }

    /// Gives the agent at port `p` (a switch's: its port 0) an M_Key, protection bits and
    /// lease period, as another SM (or the port's NVRAM) left them.
    pub fn set_m_key(&mut self, p: PortIdx, key: u64, protect_bits: u8, lease: u16) {
        let n = self.node_of(p);
        let at = if self.is_switch(n) {
            self.port_idx(n, 0).unwrap_or(p)
        } else {
            p
        };
        let info = &mut self.ports[at.idx()].info;
        info.m_key = key;
        info.m_key_protect_bits = protect_bits.min(3);
        info.m_key_lease_period = lease;
    }

    fn start_lease(&mut self, p: PortIdx, period: u64) {
        let at = self.now + period;
        let lease = &mut self.ports[p.idx()].lease;
        lease.generation = lease.generation.wrapping_add(1);
        lease.expires = Some(at);
        let generation = lease.generation;
        self.schedule(
            at,
            Event::LeaseExpiry {
                port: p,
                generation,
            },
        );
    }

    fn stop_lease(&mut self, p: PortIdx) {
        let lease = &mut self.ports[p.idx()].lease;
        lease.generation = lease.generation.wrapping_add(1);
        lease.expires = None;
    }

    pub(crate) fn lease_expiry(&mut self, p: PortIdx, generation: u32) {
        let Some(port) = self.ports.get_mut(p.idx()) else {
            return;
        };
        if port.lease.generation == generation && port.lease.expires.is_some() {
            port.lease.expires = None;
            port.info.m_key_protect_bits = 0;
            tracing::debug!(port = p.0, "M_Key lease expired: protection off");
        }
    }

    /// Trap 256 about the offending SMP, from the key port to its master SM.
    fn trap_256(&mut self, n: NodeIdx, key_port: PortIdx, mad: &[u8; 256], slid: Lid) {
        let hdr = mad::Packet::from(mad);
        let p = smp::Packet::from(mad);
        let directed = p.is_directed();
        let mut details = details_256::Repr {
            lid_addr: slid,
            dr_slid: Lid(0),
            method: hdr.method(),
            attribute_id: hdr.attr_id(),
            attribute_modifier: hdr.attr_mod(),
            m_key: p.get(smp::field::M_KEY),
            dr_notice: directed,
            dr_path_truncated: false,
            dr_hop_count: 0,
            dr_notice_return_path: Bytes([0; 30]),
        };
        if directed {
            let hops = p.get(smp::field::HOP_COUNT).min(smp::MAX_HOPS) as usize;
            details.dr_slid = p.get(smp::field::DR_SLID);
            details.dr_hop_count = hops as u8;
            details.dr_path_truncated = hops > 30;
            let kept = hops.min(30);
            details.dr_notice_return_path.0[..kept].copy_from_slice(&p.return_path()[1..=kept]);
        }
        let producer = if self.is_switch(n) {
            ProducerType::Switch
        } else {
            ProducerType::Ca
        };
        let issuer = self.ports[key_port.idx()].info.lid;
        let notice = notice::Repr::generic(producer, issuer, Trap::BadMKey(details));
        self.trap_tid += 1;
        let tid = Tid(self.trap_tid);
        self.emit_trap(key_port, tid, &notice);
    }
}
