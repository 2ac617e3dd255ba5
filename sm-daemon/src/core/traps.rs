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
    /// `m_key` and goes back the way the trap came: along `back` (the issuer's LID route
    /// to the SM, retraced) when the SM knows it, since the route from the SM to the
    /// issuer's LID may cross the very link the trap reports lost, and an issuer that gets
    /// no repress repeats its trap.
    pub(super) fn read(s: &smp::Repr, slid: Lid, m_key: u64, back: Option<&[u8]>) -> Option<Trap> {
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
            let dlid = match (s.route, back.map(smp::Directed::along)) {
                (Route::Lid, Some(Ok(d))) => {
                    r.route = Route::Directed(d);
                    Lid::PERMISSIVE
                }
                (Route::Lid, _) => slid,
                _ => Lid::PERMISSIVE,
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

/// A token bucket per issuer: a babbling port (far more traps than any real change makes)
/// is muted, its traps counted and repressed but not acted on one by one, so a storm cannot
/// keep the SM repairing or sweeping; the light sweeps still see what changed there.
#[derive(Debug)]
pub(super) struct TrapGate {
    /// Traps an issuer may send in a burst before it is muted.
    burst: f64,
    /// Traps per second an issuer earns back.
    rate: f64,
    buckets: std::collections::HashMap<Lid, Bucket>,
    /// Traps muted and traps refused as forged, since the start.
    pub(super) muted: u64,
    pub(super) forged: u64,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: super::Instant,
    muted: u64,
}

impl TrapGate {
    /// A gate letting `burst` traps through at once and `rate` per second sustained, per
    /// issuer (0 for either: no limit).
    pub(super) fn new(burst: u32, rate: f64) -> TrapGate {
        TrapGate {
            burst: if burst == 0 {
                f64::INFINITY
            } else {
                f64::from(burst)
            },
            rate: if rate <= 0.0 { f64::INFINITY } else { rate },
            buckets: Default::default(),
            muted: 0,
            forged: 0,
        }
    }

    /// Whether a trap from `issuer` at `now` is acted on.
    pub(super) fn admit(&mut self, now: super::Instant, issuer: Lid) -> bool {
        if self.burst.is_infinite() || self.rate.is_infinite() {
            return true;
        }
        let (burst, rate) = (self.burst, self.rate);
        let b = self.buckets.entry(issuer).or_insert(Bucket {
            tokens: burst,
            at: now,
            muted: 0,
        });
        let earned = (now - b.at).as_secs_f64() * rate;
        b.tokens = (b.tokens + earned).min(burst);
        b.at = now;
        if b.muted > 0 && b.tokens >= burst / 2.0 {
            tracing::info!(issuer = %issuer, muted = b.muted, "trap issuer quiet again: unmuted");
            b.muted = 0;
        }
        if b.tokens >= 1.0 && b.muted == 0 {
            b.tokens -= 1.0;
            return true;
        }
        if b.muted == 0 {
            tracing::warn!(
                issuer = %issuer,
                "trap issuer babbling (over {burst} traps at once, {rate}/s): muted, \
                 its traps counted and not acted on; light sweeps still see its changes"
            );
        }
        b.muted += 1;
        self.muted += 1;
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_babbling_issuer_is_muted_and_heard_again_once_quiet() {
        let mut g = TrapGate::new(50, 10.0);
        let t = |ms: u64| super::super::Instant::from_nanos(ms * 1_000_000);
        let l = Lid(7);
        let admitted = (0..200).filter(|_| g.admit(t(0), l)).count();
        assert_eq!(admitted, 50);
        assert_eq!(g.muted, 150);
        // Another issuer is not affected.
        assert!(g.admit(t(0), Lid(8)));
        // Still babbling a little later: muted until half the bucket is back.
        assert!(!g.admit(t(1_000), l));
        assert!(g.admit(t(3_000), l), "quiet for long enough");
        assert!(g.admit(t(3_000), l));
        // No limit at all.
        let mut open = TrapGate::new(0, 10.0);
        assert!((0..1_000).all(|_| open.admit(t(0), l)));
    }
}
