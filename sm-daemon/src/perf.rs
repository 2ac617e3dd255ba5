//! The performance manager: every port's counters (PortCounters over the performance
//! management class, QP1), read on an interval, accumulated into 64-bit totals. Where a
//! node's ClassPortInfo (asked once per node) says its agent keeps PortCountersExtended,
//! the traffic totals come from those 64-bit counters instead of PortCounters' 32-bit ones.
//!
//! Sans-IO like the core: [`PerfMgr::start`] begins a sweep over the ports it is given,
//! [`PerfMgr::poll_transmit`] hands out the Gets (at most `window` in flight),
//! [`PerfMgr::handle_mad`] takes the answers, [`PerfMgr::handle_timeout`] retries and gives
//! up. PortCounters stop at their maximum and may be cleared by anyone, so a total grows by
//! the difference between two reads, by the new value when it went down (a reset), and a
//! counter seen at three quarters of its range is cleared (a Set), as OpenSM's perfmgr does.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::Duration;

use sm_mad::perf::{self, Repr as Counters};
use sm_mad::{Guid, Lid, Method, Tid};

use crate::core::Instant;

/// How the counters are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PerfConfig {
    /// Time between the starts of two sweeps.
    pub interval: Duration,
    pub timeout: Duration,
    pub retries: u32,
    /// Gets in flight at most.
    pub window: usize,
}

impl Default for PerfConfig {
    fn default() -> Self {
        PerfConfig {
            interval: Duration::from_secs(180),
            timeout: Duration::from_millis(200),
            retries: 2,
            window: 32,
        }
    }
}

/// A port to read: where its agent answers (the switch's LID for a switch port).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Target {
    pub node: Guid,
    pub port: u8,
    pub lid: Lid,
}

/// A port's counters since the manager first read it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Totals {
    pub symbol_errors: u64,
    pub link_error_recoveries: u64,
    pub link_downed: u64,
    pub rcv_errors: u64,
    pub rcv_remote_physical_errors: u64,
    pub rcv_switch_relay_errors: u64,
    pub xmit_discards: u64,
    pub xmit_constraint_errors: u64,
    pub rcv_constraint_errors: u64,
    pub local_link_integrity_errors: u64,
    pub excessive_buffer_overrun_errors: u64,
    pub vl15_dropped: u64,
    pub xmit_data: u64,
    pub rcv_data: u64,
    pub xmit_pkts: u64,
    pub rcv_pkts: u64,
    pub xmit_wait: u64,
    /// Unicast and multicast packets (PortCountersExtended, where the agent keeps them).
    pub unicast_xmit_pkts: u64,
    pub unicast_rcv_pkts: u64,
    pub multicast_xmit_pkts: u64,
    pub multicast_rcv_pkts: u64,
}

impl Totals {
    /// Every error counter summed (link downs apart).
    pub fn errors(&self) -> u64 {
        self.symbol_errors
            + self.link_error_recoveries
            + self.rcv_errors
            + self.rcv_remote_physical_errors
            + self.rcv_switch_relay_errors
            + self.xmit_discards
            + self.xmit_constraint_errors
            + self.rcv_constraint_errors
            + self.local_link_integrity_errors
            + self.excessive_buffer_overrun_errors
            + self.vl15_dropped
    }
}

/// One port's state in the manager.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct PortStats {
    pub totals: Totals,
    /// The last values read, as the port holds them.
    #[serde(skip)]
    pub last: Option<Counters>,
    /// The last PortCountersExtended read.
    #[serde(skip)]
    pub last_ext: Option<perf::ext::Repr>,
    /// Whether the traffic totals come from PortCountersExtended.
    pub extended: bool,
    /// Whether PortCounters' traffic counters were ever added to the totals.
    #[serde(skip)]
    traffic_from_32: bool,
    pub reads: u64,
    /// Times a counter went down between reads (cleared by someone, or the port reset).
    pub resets: u64,
    /// Errors per second between the last two reads.
    pub error_rate: f64,
    /// How much LinkDownedCounter grew between the last two reads.
    pub link_downed_step: u64,
    /// The counter sweep (1, 2, ...) that read the port last.
    pub read_in: u64,
    #[serde(skip)]
    last_at: Option<Instant>,
}

/// What the last finished sweep did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct PerfSweep {
    pub ports: usize,
    pub answered: usize,
    /// Ports whose Gets all went unanswered.
    pub lost: usize,
    pub mads_sent: u64,
    pub duration_ns: u64,
}

/// Bits of CounterSelect, in PortCounters' field order.
const SELECT_ALL: u16 = 0xffff;

/// What a request asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ask {
    /// The node's ClassPortInfo: does it keep PortCountersExtended?
    Caps,
    Counters,
    Extended,
    /// A Set clearing PortCounters (its answer only ends it).
    Clear,
}

struct InFlight {
    target: Target,
    deadline: Instant,
    tries: u32,
    ask: Ask,
}

/// The performance manager.
pub struct PerfMgr {
    cfg: PerfConfig,
    next_tid: u64,
    queue: VecDeque<(Target, Ask)>,
    in_flight: HashMap<u64, InFlight>,
    /// Per node: whether its agent keeps PortCountersExtended, once known.
    extended: HashMap<Guid, bool>,
    /// Ports waiting for their node's ClassPortInfo.
    after_caps: HashMap<Guid, Vec<Target>>,
    out: VecDeque<(Lid, [u8; 256])>,
    stats: BTreeMap<(Guid, u8), PortStats>,
    sweep: Option<(Instant, PerfSweep)>,
    next_due: Option<Instant>,
    last: Option<PerfSweep>,
    sweeps: u64,
}

impl std::fmt::Debug for PerfMgr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PerfMgr")
            .field("cfg", &self.cfg)
            .field("ports", &self.stats.len())
            .field("sweeps", &self.sweeps)
            .finish()
    }
}

/// How much a counter grew from `old` to `new` (a counter that went down was reset: it
/// counted `new` since).
fn grew(old: u64, new: u64, resets: &mut u64) -> u64 {
    if new >= old {
        new - old
    } else {
        *resets += 1;
        new
    }
}

/// Adds to totals `t` how much each named counter grew from read `old` to read `new`.
macro_rules! accumulate {
    ($t:expr, $old:expr, $new:expr, $r:expr; $($f:ident),+ $(,)?) => {
        $( $t.$f += grew($old.$f.into(), $new.$f.into(), $r); )+
    };
}

/// Whether any counter in use is at three quarters of its range or more (the traffic
/// counters not at all when PortCountersExtended stands in for them).
fn near_full(c: &Counters, extended: bool) -> bool {
    let q = |v: u64, bits: u32| v >= (1u64 << bits) / 4 * 3;
    let traffic = !extended
        && (q(c.xmit_data.into(), 32)
            || q(c.rcv_data.into(), 32)
            || q(c.xmit_pkts.into(), 32)
            || q(c.rcv_pkts.into(), 32));
    traffic
        || q(c.symbol_errors.into(), 16)
        || q(c.link_error_recoveries.into(), 8)
        || q(c.link_downed.into(), 8)
        || q(c.rcv_errors.into(), 16)
        || q(c.rcv_remote_physical_errors.into(), 16)
        || q(c.rcv_switch_relay_errors.into(), 16)
        || q(c.xmit_discards.into(), 16)
        || q(c.xmit_constraint_errors.into(), 8)
        || q(c.rcv_constraint_errors.into(), 8)
        || q(c.local_link_integrity_errors.into(), 4)
        || q(c.excessive_buffer_overrun_errors.into(), 4)
        || q(c.vl15_dropped.into(), 16)
        || q(c.xmit_wait.into(), 32)
}

impl PortStats {
    /// Takes in a PortCounters read at `now`; true when the port should be cleared. With
    /// `extended`, the traffic totals are left to [`PortStats::update_ext`].
    pub fn update(&mut self, now: Instant, c: &Counters, extended: bool) -> bool {
        self.extended = extended;
        let old = self.last.unwrap_or_default();
        let t = &mut self.totals;
        let r = &mut self.resets;
        let before = t.errors();
        self.link_downed_step = grew(old.link_downed.into(), c.link_downed.into(), r);
        t.link_downed += self.link_downed_step;
        accumulate!(t, old, c, r;
            symbol_errors, link_error_recoveries, rcv_errors, rcv_remote_physical_errors,
            rcv_switch_relay_errors, xmit_discards, xmit_constraint_errors,
            rcv_constraint_errors, local_link_integrity_errors,
            excessive_buffer_overrun_errors, vl15_dropped, xmit_wait);
        if !extended {
            self.traffic_from_32 = true;
            accumulate!(t, old, c, r; xmit_data, rcv_data, xmit_pkts, rcv_pkts);
        }
        if let Some(at) = self.last_at {
            let secs = (now - at).as_secs_f64();
            if secs > 0.0 {
                self.error_rate = (t.errors() - before) as f64 / secs;
            }
        }
        self.reads += 1;
        self.last_at = Some(now);
        let clear = near_full(c, extended);
        // After a clear the port counts from zero: the next read is a difference from it.
        self.last = Some(if clear { Counters::default() } else { *c });
        clear
    }

    /// Takes in a PortCountersExtended read: 64-bit counters, which only go down when
    /// someone clears them.
    pub fn update_ext(&mut self, e: &perf::ext::Repr) {
        if self.last_ext.is_none() && self.traffic_from_32 {
            // PortCounters counted the traffic so far: this read is only the baseline.
            self.last_ext = Some(*e);
            return;
        }
        let old = self.last_ext.unwrap_or_default();
        let t = &mut self.totals;
        let r = &mut self.resets;
        accumulate!(t, old, e, r;
            xmit_data, rcv_data, xmit_pkts, rcv_pkts, unicast_xmit_pkts, unicast_rcv_pkts,
            multicast_xmit_pkts, multicast_rcv_pkts);
        self.last_ext = Some(*e);
    }
}

impl PerfMgr {
    pub fn new(cfg: PerfConfig) -> PerfMgr {
        PerfMgr {
            cfg,
            next_tid: 0,
            queue: VecDeque::new(),
            in_flight: HashMap::new(),
            extended: HashMap::new(),
            after_caps: HashMap::new(),
            out: VecDeque::new(),
            stats: BTreeMap::new(),
            sweep: None,
            next_due: None,
            last: None,
            sweeps: 0,
        }
    }

    /// Whether a sweep should start now (none running and the interval passed).
    pub fn due(&self, now: Instant) -> bool {
        self.sweep.is_none() && self.next_due.is_none_or(|t| now >= t)
    }

    /// Begins a sweep over `targets`.
    pub fn start(&mut self, now: Instant, targets: Vec<Target>) {
        self.next_due = Some(now + self.cfg.interval);
        self.sweep = Some((
            now,
            PerfSweep {
                ports: targets.len(),
                ..PerfSweep::default()
            },
        ));
        self.queue.clear();
        self.after_caps.clear();
        for t in targets {
            if self.extended.contains_key(&t.node) {
                self.queue.push_back((t, Ask::Counters));
                continue;
            }
            let waiting = self.after_caps.entry(t.node).or_default();
            if waiting.is_empty() {
                self.queue.push_back((t, Ask::Caps));
            }
            waiting.push(t);
        }
        self.pump(now);
        self.finish_if_done(now);
    }

    /// The kernel (and ibsim's shim) put their agent number in the upper half of a
    /// request's TID: only the lower half is ours, and answers are matched by it.
    fn tid(&mut self) -> u64 {
        self.next_tid = (self.next_tid + 1) & 0xffff_ffff;
        self.next_tid
    }

    fn pump(&mut self, now: Instant) {
        while self.in_flight.len() < self.cfg.window {
            let Some((target, ask)) = self.queue.pop_front() else {
                break;
            };
            self.send(now, target, ask, 0);
        }
    }

    fn send(&mut self, now: Instant, target: Target, ask: Ask, tries: u32) {
        let tid = self.tid();
        let mad = match ask {
            Ask::Caps => perf::get_class_port_info(Tid(tid)),
            Ask::Counters => perf::get_port_counters(Tid(tid), target.port),
            Ask::Extended => perf::ext::get(Tid(tid), target.port),
            Ask::Clear => perf::clear_port_counters(Tid(tid), target.port, SELECT_ALL),
        };
        self.out.push_back((target.lid, mad));
        if let Some((_, s)) = &mut self.sweep {
            s.mads_sent += 1;
        }
        self.in_flight.insert(
            tid,
            InFlight {
                target,
                deadline: now + self.cfg.timeout,
                tries,
                ask,
            },
        );
    }

    /// The next Get or Set to send: (destination LID, MAD) for QP1 with the GSI Q_Key.
    pub fn poll_transmit(&mut self) -> Option<(Lid, [u8; 256])> {
        self.out.pop_front()
    }

    /// A performance management MAD received (anything else, or an answer to nothing in
    /// flight, is ignored).
    pub fn handle_mad(&mut self, now: Instant, m: &[u8]) {
        let Ok(h) = sm_mad::mad::Repr::parse(m) else {
            tracing::debug!(len = m.len(), "perf: not a MAD; ignored");
            return;
        };
        if h.method != Method::GetResp {
            return;
        }
        let Some(f) = self.in_flight.remove(&(h.tid.0 & 0xffff_ffff)) else {
            return;
        };
        let (node, port) = (f.target.node, f.target.port);
        match f.ask {
            Ask::Caps => {
                let ext = h.status.is_ok()
                    && perf::parse_class_port_info(m).is_ok_and(|(_, c)| {
                        c.capability_mask
                            & (perf::cap::EXTENDED_WIDTH | perf::cap::EXTENDED_WIDTH_NO_IETF)
                            != 0
                    });
                self.extended.insert(node, ext);
                self.release(node);
            }
            _ if !h.status.is_ok() => {
                tracing::debug!(%node, port, status = ?h.status, ask = ?f.ask, "perf: error status");
            }
            Ask::Counters => {
                let Ok((_, c)) = perf::parse_port_counters(m) else {
                    tracing::debug!(%node, port, "perf: bad PortCounters; ignored");
                    return self.settle(now);
                };
                let extended = self.extended.get(&node).copied().unwrap_or(false);
                if let Some((_, s)) = &mut self.sweep {
                    s.answered += 1;
                }
                let sweep = self.sweeps + 1;
                let st = self.stats.entry((node, port)).or_default();
                st.read_in = sweep;
                if st.update(now, &c, extended) {
                    tracing::debug!(%node, port, "perf: counters near full; clearing");
                    self.queue.push_back((f.target, Ask::Clear));
                }
                if extended {
                    self.queue.push_front((f.target, Ask::Extended));
                }
            }
            Ask::Extended => match perf::ext::parse(m) {
                Ok((_, e)) => self.stats.entry((node, port)).or_default().update_ext(&e),
                Err(_) => tracing::debug!(%node, port, "perf: bad PortCountersExtended; ignored"),
            },
            Ask::Clear => {}
        }
        self.settle(now);
    }

    /// Queues the ports that waited for their node's ClassPortInfo.
    fn release(&mut self, node: Guid) {
        for t in self.after_caps.remove(&node).unwrap_or_default() {
            self.queue.push_back((t, Ask::Counters));
        }
    }

    fn settle(&mut self, now: Instant) {
        self.pump(now);
        self.finish_if_done(now);
    }

    /// Retries what timed out, gives up on what used its retries.
    pub fn handle_timeout(&mut self, now: Instant) {
        let due: Vec<u64> = self
            .in_flight
            .iter()
            .filter(|(_, f)| f.deadline <= now)
            .map(|(&t, _)| t)
            .collect();
        for tid in due {
            let Some(f) = self.in_flight.remove(&tid) else {
                continue;
            };
            if f.tries < self.cfg.retries {
                self.send(now, f.target, f.ask, f.tries + 1);
                continue;
            }
            match f.ask {
                // Asked again next sweep; the ports are read without it meanwhile.
                Ask::Caps => self.release(f.target.node),
                Ask::Counters => {
                    if let Some((_, s)) = &mut self.sweep {
                        s.lost += 1;
                    }
                }
                Ask::Extended | Ask::Clear => {}
            }
        }
        self.pump(now);
        self.finish_if_done(now);
    }

    fn finish_if_done(&mut self, now: Instant) {
        if !self.in_flight.is_empty() || !self.queue.is_empty() {
            return;
        }
        if let Some((t0, mut s)) = self.sweep.take() {
            s.duration_ns = (now - t0).as_nanos() as u64;
            self.sweeps += 1;
            tracing::info!(
                ports = s.ports,
                answered = s.answered,
                lost = s.lost,
                mads = s.mads_sent,
                ms = s.duration_ns as f64 / 1e6,
                "port counters read"
            );
            self.last = Some(s);
        }
    }

    /// The earliest deadline of a Get in flight, or the next sweep's start.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let flight = self.in_flight.values().map(|f| f.deadline).min();
        match (
            flight,
            self.sweep.is_none().then_some(self.next_due).flatten(),
        ) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Every port read so far.
    pub fn stats(&self) -> &BTreeMap<(Guid, u8), PortStats> {
        &self.stats
    }

    /// The last finished sweep, and how many there were.
    pub fn last_sweep(&self) -> Option<(PerfSweep, u64)> {
        self.last.map(|s| (s, self.sweeps))
    }
}

/// The ports of a fabric to read: every linked switch port (through its switch's LID) and
/// every linked CA or router port with a LID.
pub fn targets(f: &sm_core::fabric::Fabric) -> Vec<Target> {
    use sm_core::NodeKind;
    let mut out = Vec::new();
    for (i, n) in f.nodes().iter().enumerate() {
        let ni = sm_core::NodeIdx(i as u32);
        let base = f.port_of(ni, 0).map(|p| f.port(p).lid);
        for q in f.node_ports(ni) {
            let port = f.port(q);
            if port.num == 0 || port.remote.is_none() {
                continue;
            }
            let lid = if n.kind == NodeKind::Switch {
                base.unwrap_or(Lid(0))
            } else {
                port.lid
            };
            if lid.0 != 0 {
                out.push(Target {
                    node: n.guid,
                    port: port.num,
                    lid,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }

    fn answer(req: &[u8; 256], c: Counters) -> [u8; 256] {
        let mut b = *req;
        b[3] = Method::GetResp.to_raw_value();
        // The agent number the kernel put in the TID's upper half comes back with it.
        b[8..12].copy_from_slice(&[0, 0, 0, 2]);
        let c = Counters {
            port_select: req[perf::DATA_OFFSET + 1],
            ..c
        };
        c.emit(&mut b[perf::DATA_OFFSET..]).unwrap();
        b
    }

    #[test]
    fn totals_grow_by_differences_survive_resets_and_clear_near_the_top() {
        let mut s = PortStats::default();
        let c = |sym: u16, data: u32| Counters {
            symbol_errors: sym,
            xmit_data: data,
            ..Counters::default()
        };
        assert!(!s.update(at(0), &c(5, 1_000), false));
        assert!(!s.update(at(1_000), &c(9, 3_000), false));
        assert_eq!(s.totals.symbol_errors, 9);
        assert_eq!(s.totals.xmit_data, 3_000);
        assert_eq!(s.error_rate, 4.0, "4 errors in a second");
        // Cleared by someone else: counted from zero again.
        assert!(!s.update(at(2_000), &c(2, 500), false));
        assert_eq!(s.totals.symbol_errors, 11);
        assert_eq!(s.totals.xmit_data, 3_500);
        assert_eq!(s.resets, 2);
        // Near the top of 32 bits: cleared, and the next read counts from zero.
        assert!(s.update(at(3_000), &c(2, 0xd000_0000), false));
        let before = s.totals.xmit_data;
        assert!(!s.update(at(4_000), &c(0, 100), false));
        assert_eq!(s.totals.xmit_data, before + 100);
        assert_eq!(s.reads, 5);
        // PortCountersExtended takes over the traffic: its first read is the baseline, and
        // a full 32-bit PortCounters no longer asks for a clear.
        let e = |data: u64| perf::ext::Repr {
            xmit_data: data,
            ..Default::default()
        };
        assert!(!s.update(at(5_000), &c(0, 0xffff_ffff), true));
        assert_eq!(s.totals.xmit_data, before + 100);
        s.update_ext(&e(7 << 40));
        assert_eq!(s.totals.xmit_data, before + 100);
        s.update_ext(&e((7 << 40) + (1 << 33)));
        assert_eq!(s.totals.xmit_data, before + 100 + (1 << 33));
        assert!(s.extended);
    }

    /// A PMA: ClassPortInfo with `caps`, PortCounters `c`, PortCountersExtended `e`.
    fn agent(req: &[u8; 256], caps: u16, c: Counters, e: perf::ext::Repr) -> [u8; 256] {
        let attr = u16::from_be_bytes([req[16], req[17]]);
        let mut b = answer(req, c);
        let d = &mut b[perf::DATA_OFFSET..];
        match attr {
            perf::PORT_COUNTERS_EXTENDED => {
                let e = perf::ext::Repr {
                    port_select: req[perf::DATA_OFFSET + 1],
                    ..e
                };
                e.emit(d).unwrap();
            }
            sm_mad::class_port_info::ATTR_ID => {
                d.fill(0);
                sm_mad::class_port_info::Repr {
                    capability_mask: caps,
                    ..Default::default()
                }
                .emit(d)
                .unwrap();
            }
            _ => {}
        }
        b
    }

    #[test]
    fn nodes_keeping_extended_counters_are_read_with_them_once_asked() {
        let mut p = PerfMgr::new(PerfConfig::default());
        // Node 1 keeps PortCountersExtended on ports 1 and 2, node 2 does not.
        let t = |node: u64, port: u8| Target {
            node: Guid(node),
            port,
            lid: Lid(node as u16),
        };
        let big = perf::ext::Repr {
            xmit_data: 5 << 40,
            rcv_pkts: 1 << 35,
            unicast_xmit_pkts: 9,
            ..Default::default()
        };
        let small = Counters {
            xmit_data: 1_000,
            ..Default::default()
        };
        let mut asked = Vec::new();
        for round in 0..2u64 {
            p.start(at(round * 200_000), vec![t(1, 1), t(1, 2), t(2, 1)]);
            while let Some((lid, req)) = p.poll_transmit() {
                let attr = u16::from_be_bytes([req[16], req[17]]);
                asked.push((round, lid.0, attr));
                let caps = if lid.0 == 1 {
                    perf::cap::EXTENDED_WIDTH
                } else {
                    0
                };
                p.handle_mad(at(round * 200_000 + 1), &agent(&req, caps, small, big));
            }
        }
        let caps = asked.iter().filter(|a| a.2 == 0x0001).count();
        assert_eq!(caps, 2, "ClassPortInfo once per node: {asked:?}");
        let ext = asked
            .iter()
            .filter(|a| a.2 == perf::PORT_COUNTERS_EXTENDED)
            .count();
        assert_eq!(ext, 4, "two ports of node 1, two sweeps: {asked:?}");
        let s = &p.stats()[&(Guid(1), 2)];
        assert!(s.extended);
        assert_eq!(
            s.totals.xmit_data,
            5 << 40,
            "64-bit, not PortCounters' 1,000"
        );
        assert_eq!(s.totals.rcv_pkts, 1 << 35);
        assert_eq!(s.totals.unicast_xmit_pkts, 9);
        let s = &p.stats()[&(Guid(2), 1)];
        assert!(!s.extended);
        assert_eq!(s.totals.xmit_data, 1_000);
    }

    #[test]
    fn a_sweep_reads_every_port_in_a_window_retries_and_gives_up() {
        let cfg = PerfConfig {
            window: 2,
            retries: 1,
            ..PerfConfig::default()
        };
        let mut p = PerfMgr::new(cfg);
        assert!(p.due(at(0)));
        let targets: Vec<Target> = (1..=3)
            .map(|i| Target {
                node: Guid(i),
                port: i as u8,
                lid: Lid(i as u16),
            })
            .collect();
        p.start(at(0), targets);
        assert!(!p.due(at(0)));
        // Node 2's agent answers ClassPortInfo but never PortCounters.
        let mut counters_sent = Vec::new();
        let mut t = 0;
        loop {
            while let Some((lid, req)) = p.poll_transmit() {
                assert!(p.in_flight.len() <= 2, "a window of 2");
                let attr = u16::from_be_bytes([req[16], req[17]]);
                if attr == perf::PORT_COUNTERS {
                    counters_sent.push(lid.0);
                    if lid.0 == 2 {
                        continue;
                    }
                }
                let c = Counters {
                    link_downed: 3,
                    ..Counters::default()
                };
                p.handle_mad(at(t), &agent(&req, 0, c, Default::default()));
            }
            if p.last_sweep().is_some() {
                break;
            }
            t += 300;
            assert!(t < 2_000, "the sweep never ends");
            p.handle_timeout(at(t));
        }
        // Retried once, then lost.
        counters_sent.sort();
        assert_eq!(counters_sent, [1, 2, 2, 3]);
        let (s, n) = p.last_sweep().unwrap();
        assert_eq!(
            (s.ports, s.answered, s.lost, s.mads_sent, n),
            (3, 2, 1, 7, 1)
        );
        let b = perf::get_port_counters(Tid(2), 2);
        assert_eq!(p.stats()[&(Guid(1), 1)].totals.link_downed, 3);
        // A late answer to nothing in flight changes nothing.
        p.handle_mad(at(700), &answer(&b, Counters::default()));
        assert_eq!(p.stats().len(), 2);
        assert!(p.due(at(180_001)));
    }
}
