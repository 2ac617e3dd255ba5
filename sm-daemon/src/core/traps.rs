//! Traps from the fabric: what a Trap(Notice) SMP says, the TrapRepress that stops its
//! issuer repeating it, and which traps call for a sweep.

use sm_mad::smp::{self, Route};
use sm_mad::{Lid, attr, notice};

/// A trap as the core acts on it.
#[derive(Debug, Clone)]
pub(super) struct Trap {
    /// The generic trap number (0 for vendor traps and notices that do not parse).
    pub(super) number: u16,
    pub(super) notice: Option<notice::Repr>,
    /// The TrapRepress to send, and where.
    pub(super) repress: Option<(Lid, [u8; 256])>,
}

impl Trap {
    /// Reads a Trap SMP (`None` if its attribute is not a Notice). The repress carries
    /// `m_key` and goes back the way the trap came.
    pub(super) fn read(s: &smp::Repr, slid: Lid, m_key: u64) -> Option<Trap> {
        if s.attr_id != attr::NOTICE {
            return None;
        }
        let notice = s.attribute::<notice::Repr>().ok();
        let number = match notice.map(|n| n.kind) {
            Some(notice::Kind::Generic { trap, .. }) => trap.number(),
            _ => 0,
        };
        let repress = notice::trap_repress(s).ok().and_then(|mut r| {
            r.m_key = m_key;
            let dlid = if matches!(s.route, Route::Lid) {
                slid
            } else {
                Lid::PERMISSIVE
            };
            r.to_bytes().ok().map(|b| (dlid, b))
        });
        Some(Trap {
            number,
            notice,
            repress,
        })
    }

    /// Whether the trap calls for a heavy sweep: 128 (a link changed state), 144 (a port's
    /// capabilities changed, IsSM among them: an SM started, or a better standby asks for
    /// the subnet), and anything we cannot read.
    pub(super) fn calls_for_sweep(&self) -> bool {
        self.number == notice::trap::LINK_STATE_CHANGE || self.number == 144 || self.number == 0
    }
}
