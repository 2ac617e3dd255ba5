//! Probes: an end port asks another port's agent for an attribute, LID-routed, as
//! `smpquery` would from a host. What came back (or that nothing did) is kept for the test
//! or report to look at, which is how M_Key protection and SM_Key disclosure are checked
//! from the point of view of a host on the fabric.

use sm_core::fabric::PortIdx;
use sm_mad::smp::{self, Route};
use sm_mad::{Method, Tid};

use crate::Sim;

/// The TID's upper half marks a probe's answer; the lower half is its index.
const PROBE_TID: u64 = 0x5052_4f42 << 32;

/// One probe and its answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    pub from: PortIdx,
    pub to: PortIdx,
    pub attr: u16,
    pub m_key: u64,
    /// The whole answer MAD, when one came back.
    pub answer: Option<[u8; 256]>,
}

impl Sim {
    /// Every probe sent so far, in order.
    pub fn probes(&self) -> &[Probe] {
        &self.probes
    }

    /// Sends SubnGet(`attr`) from end port `from` to the LID of `to` (the attribute
    /// modifier names `to`'s port number, as for a switch port's PortInfo).
    pub(crate) fn probe(&mut self, from: PortIdx, to: PortIdx, attr: u16, m_key: u64) {
        let index = self.probes.len() as u64;
        self.probes.push(Probe {
            from,
            to,
            attr,
            m_key,
            answer: None,
        });
        let modifier = u32::from(self.ports[to.idx()].num);
        let mut req = smp::Repr::request(
            Method::Get,
            Tid(PROBE_TID | index),
            attr,
            modifier,
            Route::Lid,
        );
        req.m_key = m_key;
        let Ok(buf) = req.to_bytes() else {
            return;
        };
        let dlid = self.lid_of(to);
        self.inject(from, dlid, buf);
    }

    /// Takes `mad` arriving at an end port when it answers a probe; false when it does not.
    pub(crate) fn probe_answered(&mut self, mad: &[u8; 256]) -> bool {
        let hdr = sm_mad::mad::Packet::from(mad);
        let tid = hdr.tid().0;
        if hdr.method() != Method::GetResp || tid & !0xffff_ffff != PROBE_TID {
            return false;
        }
        if let Some(p) = self.probes.get_mut((tid & 0xffff_ffff) as usize) {
            p.answer.get_or_insert(*mad);
        }
        true
    }
}
