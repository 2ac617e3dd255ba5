//! Time as the core sees it: an [`Instant`] on whatever clock the shell runs (virtual in
//! tests and the simulated fabric, monotonic on a umad port), spans as
//! [`std::time::Duration`], and one table of the core's own timers.

use std::time::Duration;

/// A point in time: nanoseconds since the shell's epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(u64);

impl Instant {
    /// The shell's epoch.
    pub const ZERO: Instant = Instant(0);

    pub const fn from_nanos(ns: u64) -> Instant {
        Instant(ns)
    }

    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// The time from `earlier` to `self`, zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl std::ops::Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(nanos(d)))
    }
}

impl std::ops::AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

impl std::ops::Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, earlier: Instant) -> Duration {
        self.saturating_duration_since(earlier)
    }
}

impl sm_mad::rmpp::Timestamp for Instant {
    fn plus(self, d: Duration) -> Self {
        self + d
    }
}

/// A duration in nanoseconds, saturating (no configured span comes near 584 years).
pub(crate) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The core's timers (requests and the SA keep their own deadlines).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Timer {
    /// The next light sweep.
    LightSweep,
    /// A heavy sweep after a back-off.
    HeavySweep,
    /// The joins and leaves gathered since the last multicast recomputation are due.
    McastBatch,
    /// A standby's next poll of the master.
    MasterPoll,
    /// The traps gathered since the first of a burst are looked at.
    TrapBatch,
}

const TIMERS: usize = 5;

impl Timer {
    const fn slot(self) -> usize {
        match self {
            Timer::LightSweep => 0,
            Timer::HeavySweep => 1,
            Timer::McastBatch => 2,
            Timer::MasterPoll => 3,
            Timer::TrapBatch => 4,
        }
    }
    pub(crate) const ALL: [Timer; TIMERS] = [
        Timer::LightSweep,
        Timer::HeavySweep,
        Timer::McastBatch,
        Timer::MasterPoll,
        Timer::TrapBatch,
    ];
}

/// When each timer fires, if armed.
#[derive(Debug, Clone, Default)]
pub(crate) struct TimerTable {
    at: [Option<Instant>; TIMERS],
}

impl TimerTable {
    pub(crate) fn set(&mut self, t: Timer, at: Instant) {
        self.at[t.slot()] = Some(at);
    }

    /// Arms `t` unless it is armed already (a batch keeps its first deadline).
    pub(crate) fn set_if_idle(&mut self, t: Timer, at: Instant) {
        self.at[t.slot()].get_or_insert(at);
    }

    pub(crate) fn stop(&mut self, t: Timer) {
        self.at[t.slot()] = None;
    }

    pub(crate) fn get(&self, t: Timer) -> Option<Instant> {
        self.at[t.slot()]
    }

    /// Disarms `t` and says whether it was due at `now`.
    pub(crate) fn take_expired(&mut self, t: Timer, now: Instant) -> bool {
        let due = self.at[t.slot()].is_some_and(|at| at <= now);
        if due {
            self.at[t.slot()] = None;
        }
        due
    }

    /// The earliest armed timer.
    #[cfg(test)]
    pub(crate) fn next(&self) -> Option<Instant> {
        Timer::ALL.iter().filter_map(|&t| self.get(t)).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_durations_and_timers() {
        let t = Instant::from_nanos(1_000);
        assert_eq!((t + Duration::from_micros(2)).as_nanos(), 3_000);
        assert_eq!(t - Instant::from_nanos(1_500), Duration::ZERO);
        let mut timers = TimerTable::default();
        assert_eq!(timers.next(), None);
        timers.set(Timer::LightSweep, Instant::from_nanos(50));
        timers.set_if_idle(Timer::McastBatch, Instant::from_nanos(20));
        timers.set_if_idle(Timer::McastBatch, Instant::from_nanos(30));
        assert_eq!(timers.next(), Some(Instant::from_nanos(20)));
        assert!(!timers.take_expired(Timer::LightSweep, Instant::from_nanos(49)));
        assert!(timers.take_expired(Timer::McastBatch, Instant::from_nanos(25)));
        assert_eq!(timers.get(Timer::McastBatch), None);
        assert_eq!(timers.next(), Some(Instant::from_nanos(50)));
    }
}
