//! Which SM runs the subnet (IBA 14.4): SMInfo answered to other SMs, the election at the end
//! of discovery, a standby's polling of the master, and handover.
//!
//! Every heavy sweep asks each end port whose PortInfo.CapabilityMask has IsSM for its SMInfo.
//! An SM that is Discovering becomes Standby when it finds a master or a better SM (higher
//! priority, then lower port GUID), else Master. A master that finds a better standby hands
//! the subnet over (Set(SMInfo) Handover; it stands by once the Set is answered). A standby
//! polls the master every `poll_interval` (one SMP each, not retried); after `poll_retries`
//! polls in a row go unanswered, or as soon as the master says it is no longer master, it
//! sweeps again as Discovering, and the best remaining SM takes over.

use sm_mad::sm_info::{self, SmInfoControl, SmState};
use sm_mad::smp::{self, Route};
use sm_mad::{Guid, Lid, MadStatus, Method, attr, notice, port_info};

use super::{Discovery, Event, Nanos, Phase, Purpose, Sm, emit_data};

/// Another SM, as its SMInfo told us.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteSm {
    pub guid: Guid,
    pub lid: Lid,
    pub priority: u8,
    pub state: SmState,
    pub act_count: u32,
    /// Directed route to its port (empty when only its LID is known).
    pub(super) path: Vec<u8>,
}

/// Where the election stands.
#[derive(Debug, Clone)]
pub(super) struct Election {
    pub(super) state: SmState,
    /// The master a standby polls.
    pub(super) master: Option<RemoteSm>,
    pub(super) next_poll: Option<Nanos>,
    /// Polls in a row the master did not answer as master.
    pub(super) misses: u32,
    /// The standby the subnet is being handed to (until it acknowledges).
    pub(super) handing_to: Option<Guid>,
    /// The other SMs the last heavy sweep found.
    pub(super) remote: Vec<RemoteSm>,
    /// A new master (just started, or taking over): its sweeps ask every end port that can
    /// for a client reregistration until one brings the subnet up, since what the SA
    /// knew (joins, services, subscriptions) is gone.
    pub(super) fresh: bool,
}

impl Default for Election {
    fn default() -> Self {
        Election {
            state: SmState::Discovering,
            master: None,
            next_poll: None,
            misses: 0,
            handing_to: None,
            remote: Vec::new(),
            fresh: false,
        }
    }
}

/// Whether an SM of (priority `a`, GUID `ag`) outranks one of (`b`, `bg`): the higher priority,
/// then the lower GUID.
pub(super) fn outranks(a: u8, ag: Guid, b: u8, bg: Guid) -> bool {
    a > b || (a == b && ag.0 < bg.0)
}

/// Whether a Set(SMInfo) with `control` may come from an SM in `sender` state: Handover,
/// Disable, Standby and Discover from a master, Acknowledge from a standby (IBA 14.4.1;
/// OpenSM answers the others with "invalid field" and so do we).
fn set_is_legal(control: u32, sender: SmState) -> bool {
    match SmInfoControl::from(control) {
        SmInfoControl::Acknowledge => sender == SmState::Standby,
        SmInfoControl::Handover
        | SmInfoControl::Disable
        | SmInfoControl::Standby
        | SmInfoControl::Discover => sender == SmState::Master,
        _ => false,
    }
}

/// What the election decided at the end of a discovery.
pub(super) enum Decision {
    /// Program the subnet.
    Master,
    /// Leave it to `RemoteSm`.
    Standby(RemoteSm),
}

impl Sm {
    /// This SM's state in the election.
    pub fn sm_state(&self) -> SmState {
        self.election.state
    }

    /// The master this SM stands by for, when it is a standby.
    pub fn master(&self) -> Option<&RemoteSm> {
        self.election.master.as_ref()
    }

    /// The other SMs the last heavy sweep found.
    pub fn remote_sms(&self) -> &[RemoteSm] {
        &self.election.remote
    }

    /// The other SMs as SMInfo, with their LIDs (for the SA).
    pub(super) fn remote_sm_infos(&self) -> Vec<(Lid, sm_info::Repr)> {
        self.election
            .remote
            .iter()
            .filter(|r| r.guid != self.own_guid && r.lid.0 != 0)
            .map(|r| {
                (
                    r.lid,
                    sm_info::Repr {
                        guid: r.guid,
                        sm_key: 0,
                        act_count: r.act_count,
                        priority: r.priority,
                        sm_state: r.state,
                    },
                )
            })
            .collect()
    }

    /// Our SMInfo; the SM_Key only for a requester that presented it.
    fn own_sm_info(&self, show_key: bool) -> sm_info::Repr {
        sm_info::Repr {
            guid: self.own_guid,
            sm_key: if show_key { self.p.sm_key } else { 0 },
            act_count: self.reqs.counts.sent as u32,
            priority: self.p.sm_priority,
            sm_state: self.election.state,
        }
    }

    /// Discovery found an end port with IsSM: ask it for its SMInfo.
    pub(super) fn ask_sm_info(&mut self, now: Nanos, node: usize, port: u8, path: &[u8]) {
        let data = emit_data(&self.own_sm_info(true));
        self.submit_smp(
            now,
            Purpose::SmInfo { node, port },
            Method::Get,
            attr::SM_INFO,
            0,
            path,
            data,
        );
    }

    /// An SMInfo answer during discovery.
    pub(super) fn on_sm_info(d: &mut Discovery, node: usize, port: u8, s: &smp::Repr) {
        let Ok(info) = s.attribute::<sm_info::Repr>() else {
            return;
        };
        let Some(n) = d.nodes.get(node) else {
            return;
        };
        let lid = n
            .ports
            .get(port as usize)
            .and_then(|p| p.info)
            .map_or(Lid(0), |pi| pi.lid);
        let path = n.route_to(port).map(<[u8]>::to_vec).unwrap_or_default();
        d.sms.retain(|r| r.guid != info.guid);
        d.sms.push(RemoteSm {
            guid: info.guid,
            lid,
            priority: info.priority,
            state: info.sm_state,
            act_count: info.act_count,
            path,
        });
    }

    /// Whether a discovered end port claims an SM other than us.
    pub(super) fn is_other_sm(pi: &port_info::Repr, own: bool) -> bool {
        !own && pi.capability_mask & port_info::cap::IS_SM != 0
    }

    /// The election at the end of a heavy sweep's discovery.
    pub(super) fn elect(&mut self, now: Nanos, d: &Discovery) -> Decision {
        if d.own_guid.0 != 0 {
            self.own_guid = d.own_guid;
        }
        if let Some(pi) = d
            .own
            .and_then(|(n, p)| d.nodes.get(n)?.ports.get(p as usize)?.info)
        {
            self.own_lid = pi.lid;
        }
        let me = (self.p.sm_priority, self.own_guid);
        let mut others: Vec<RemoteSm> = d
            .sms
            .iter()
            .filter(|r| r.guid != self.own_guid && r.state != SmState::NotActive)
            .cloned()
            .collect();
        // Best first: the higher priority, then the lower GUID.
        others.sort_by_key(|r| (std::cmp::Reverse(r.priority), r.guid.0));
        self.election.remote = d.sms.clone();
        let better = |r: &RemoteSm| outranks(r.priority, r.guid, me.0, me.1);
        let master = others.iter().find(|r| r.state == SmState::Master);
        match self.election.state {
            SmState::Master => {
                // Two masters (subnets merged): the lesser one yields.
                if let Some(m) = master.filter(|m| better(m)) {
                    return Decision::Standby(m.clone());
                }
                // The other master may have programmed the switches meanwhile: what we
                // think they hold is no longer known.
                if master.is_some() {
                    self.forget_programmed();
                }
                // A better standby gets the subnet, once the tables are in place.
                if let Some(b) = others
                    .iter()
                    .find(|r| better(r) && r.state == SmState::Standby)
                {
                    if self.election.handing_to != Some(b.guid) {
                        self.election.handing_to = Some(b.guid);
                        tracing::info!(to = %b.guid, priority = b.priority, "handing the subnet over");
                        self.send_control(now, b, SmInfoControl::Handover);
                    }
                }
                Decision::Master
            }
            _ => {
                if let Some(m) = master {
                    return Decision::Standby(m.clone());
                }
                if let Some(b) = others.iter().find(|r| better(r)) {
                    return Decision::Standby(b.clone());
                }
                Decision::Master
            }
        }
    }

    /// Becomes master (before programming).
    pub(super) fn become_master(&mut self) {
        if self.election.state != SmState::Master {
            tracing::info!(priority = self.p.sm_priority, "entering MASTER state");
            self.election.fresh = true;
            self.forget_programmed();
        }
        self.election.state = SmState::Master;
        self.election.master = None;
        self.election.next_poll = None;
        self.election.misses = 0;
    }

    /// Forgets what the switches and ports were last given: another SM may have changed
    /// any of it, so the next sweep compares against what it reads, and sends every LFT,
    /// table and MFT block again.
    pub(super) fn forget_programmed(&mut self) {
        self.lft_shadow.clear();
        self.top_shadow.clear();
        self.table_shadow.clear();
        self.mcast.forget_all();
    }

    /// Becomes a standby of `master`: nothing is programmed; the master is polled.
    pub(super) fn become_standby(&mut self, now: Nanos, master: RemoteSm) {
        tracing::info!(
            master = %master.guid,
            lid = %master.lid,
            priority = master.priority,
            "entering STANDBY state"
        );
        self.election.state = SmState::Standby;
        self.election.handing_to = None;
        self.election.misses = 0;
        self.election.next_poll = Some(now + self.p.poll_interval);
        self.election.master = Some(master);
        self.up = false;
        self.next_light = None;
        self.next_heavy = None;
        self.resweep = false;
    }

    /// Ends a heavy sweep that left the subnet to another SM.
    pub(super) fn finish_standby(&mut self, now: Nanos, master: RemoteSm) {
        self.become_standby(now, master);
        self.report.sm_state = "standby".into();
        self.report.sweep_ns = now - self.started_at;
        self.events
            .push_back(Event::SweepDone(Box::new(self.report.clone())));
        self.phase = Phase::Idle;
    }

    /// The standby's poll of the master, when due.
    pub(super) fn poll_master(&mut self, now: Nanos) {
        if self.election.state != SmState::Standby
            || self.election.next_poll.is_none_or(|t| t > now)
        {
            return;
        }
        // A fixed cadence: the next poll is due an interval after this one was sent.
        self.election.next_poll = Some(now + self.p.poll_interval);
        let Some(mut m) = self.election.master.clone() else {
            return;
        };
        // After a miss, the next poll goes by directed route: a master whose LID the
        // switches no longer route (stale tables after a partition) is still alive.
        if self.election.misses % 2 == 1 && !m.path.is_empty() {
            m.lid = Lid(0);
        }
        if !self.send_sm_info(now, Purpose::PollMaster, Method::Get, 0, &m) {
            // No way to reach it: a missed poll.
            self.on_poll(now, None);
        }
    }

    /// An SMInfo request (with our SMInfo as data) to another SM: LID-routed when its LID is
    /// known, else along its directed route; false when it has neither. Polls go once (a
    /// missed poll is what `poll_retries` counts); the rest with the usual SMP retries.
    fn send_sm_info(
        &mut self,
        now: Nanos,
        purpose: Purpose,
        method: Method,
        modifier: u32,
        to: &RemoteSm,
    ) -> bool {
        let retries = if matches!(purpose, Purpose::PollMaster) {
            0
        } else {
            self.p.smp_retries
        };
        let data = emit_data(&self.own_sm_info(true));
        if to.lid.0 != 0 && to.lid != Lid::PERMISSIVE {
            let tid = self.reqs.tid();
            let mut req = smp::Repr::request(method, tid, attr::SM_INFO, modifier, Route::Lid);
            req.m_key = self.p.m_key;
            if let Some(d) = data {
                req.data.0 = d;
            }
            if let Ok(b) = req.to_bytes() {
                self.reqs.submit_with(now, purpose, to.lid, b, retries);
            }
            true
        } else if !to.path.is_empty() {
            let what = (attr::SM_INFO, modifier);
            self.submit_dr(now, purpose, method, what, &to.path, data, retries);
            true
        } else {
            false
        }
    }

    /// The master's answer to a poll (`None`: unanswered).
    pub(super) fn on_poll(&mut self, now: Nanos, s: Option<&smp::Repr>) {
        if self.election.state != SmState::Standby {
            return;
        }
        let state = s
            .filter(|s| s.status == MadStatus::OK)
            .and_then(|s| s.attribute::<sm_info::Repr>().ok())
            .map(|i| i.sm_state);
        match state {
            Some(SmState::Master) => {
                self.election.misses = 0;
                self.ask_for_handover();
            }
            // Not (or not yet) master: counts as a miss, so a better SM that never takes
            // over does not keep the subnet without one.
            Some(SmState::Discovering) | None => self.election.misses += 1,
            Some(_) => self.election.misses = self.p.poll_retries,
        }
        if self.election.misses >= self.p.poll_retries {
            tracing::warn!(
                master = ?self.election.master.as_ref().map(|m| m.guid),
                "master lost; discovering"
            );
            self.election.state = SmState::Discovering;
            self.election.master = None;
            self.election.next_poll = None;
            self.begin_heavy(now);
        }
    }

    /// A Set(SMInfo) we sent went unanswered: a handover may be tried again by a later sweep.
    pub(super) fn on_control_lost(&mut self, to: Guid) {
        if self.election.handing_to == Some(to) {
            tracing::warn!(to = %to, "handover unanswered; staying master");
            self.election.handing_to = None;
        }
    }

    /// A standby that outranks the master tells it so with a trap 144 (SM priority
    /// changed), after every poll, as OpenSM does: the master's heavy sweep then hands the
    /// subnet over.
    fn ask_for_handover(&mut self) {
        let Some(m) = self.election.master.as_ref() else {
            return;
        };
        if m.lid.0 == 0 || !outranks(self.p.sm_priority, self.own_guid, m.priority, m.guid) {
            return;
        }
        let details = notice::details_144::Repr {
            lid_addr: self.own_lid,
            capability_mask: port_info::cap::IS_SM,
            sm_priority_change: true,
            ..Default::default()
        };
        let n = notice::Repr::generic(
            notice::ProducerType::Ca,
            self.own_lid,
            notice::Trap::LocalChanges(details),
        );
        let tid = self.reqs.tid();
        let mut req = smp::Repr::request(Method::Trap, tid, attr::NOTICE, 0, Route::Lid);
        req.m_key = self.p.m_key;
        if req.set_attribute(&n).is_err() {
            return;
        }
        if let Ok(bytes) = req.to_bytes() {
            tracing::debug!(master = %m.guid, "trap 144: asking the master for the subnet");
            let lid = m.lid;
            self.reqs.send_unsolicited(lid, bytes);
        }
    }

    /// Set(SMInfo) with `control` to `to`.
    fn send_control(&mut self, now: Nanos, to: &RemoteSm, control: SmInfoControl) {
        let modifier = u32::from(control);
        let purpose = Purpose::SmControl {
            control: modifier,
            to: to.guid,
        };
        if !self.send_sm_info(now, purpose, Method::Set, modifier, to) {
            tracing::debug!(to = %to.guid, "no route to that SM");
        }
    }

    /// Get or Set(SMInfo) from another SM: answered with our SMInfo (after acting on a Set).
    pub(super) fn on_sm_info_request(&mut self, now: Nanos, slid: Lid, s: &smp::Repr) {
        let theirs = s.attribute::<sm_info::Repr>().ok();
        // The SM_Key is disclosed to a requester that passes M_Key checking (as OpenSM).
        let mut show_key = self.p.m_key == 0 || s.m_key == self.p.m_key;
        let mut status = MadStatus::OK;
        if s.method == Method::Set {
            let keyed = theirs.is_some_and(|t| t.sm_key == self.p.sm_key);
            let legal = theirs.is_some_and(|t| set_is_legal(s.attr_mod, t.sm_state));
            if !keyed {
                tracing::debug!(from = %slid, "Set(SMInfo) with a wrong SM_Key ignored");
                show_key = false;
            } else if !legal {
                tracing::debug!(from = %slid, control = s.attr_mod, "Set(SMInfo) not legal from its sender's state");
                status = MadStatus::INVALID_FIELD;
            } else {
                self.on_control(now, slid, s.attr_mod, theirs);
            }
        } else if let Some(t) = theirs.filter(|t| {
            self.election.state == SmState::Master
                && matches!(t.sm_state, SmState::Standby | SmState::Discovering)
                && t.guid.0 != 0
                && t.guid != self.own_guid
                && self.election.handing_to != Some(t.guid)
                && outranks(t.priority, t.guid, self.p.sm_priority, self.own_guid)
        }) {
            // A better SM is asking: a heavy sweep finds it and hands the subnet over.
            tracing::info!(from = %t.guid, priority = t.priority, "a better SM appeared");
            self.request_sweep(now, true);
        }
        let mut r = *s;
        r.method = Method::GetResp;
        r.status = status;
        r.m_key = self.p.m_key;
        if let Route::Directed(d) = &mut r.route {
            d.direction = true;
        }
        let mut data = [0u8; 64];
        if self.own_sm_info(show_key).emit(&mut data).is_err() {
            return;
        }
        r.data.0 = data;
        let dlid = if matches!(s.route, Route::Lid) {
            slid
        } else {
            Lid::PERMISSIVE
        };
        if let Ok(b) = r.to_bytes() {
            self.reqs.send_unsolicited(dlid, b);
        }
    }

    fn on_control(&mut self, now: Nanos, slid: Lid, modifier: u32, from: Option<sm_info::Repr>) {
        let Some(from) = from else { return };
        match SmInfoControl::from(modifier) {
            SmInfoControl::Handover
                if matches!(self.election.state, SmState::Standby | SmState::Discovering) =>
            {
                // The answer to the Set tells the old master it is done (it stands by on
                // it, as OpenSM does); no Acknowledge is sent, which OpenSM would refuse
                // from a master.
                tracing::info!(from = %from.guid, "handover received");
                self.become_master();
                self.request_sweep(now, true);
            }
            SmInfoControl::Acknowledge if self.election.handing_to == Some(from.guid) => {
                let new = RemoteSm {
                    guid: from.guid,
                    lid: slid,
                    priority: from.priority,
                    state: SmState::Master,
                    act_count: from.act_count,
                    path: self
                        .election
                        .remote
                        .iter()
                        .find(|r| r.guid == from.guid)
                        .map(|r| r.path.clone())
                        .unwrap_or_default(),
                };
                self.stand_down(now, new);
            }
            SmInfoControl::Disable => {
                tracing::info!(from = %from.guid, "disabled by another SM: NOTACTIVE");
                self.stop_activity();
                self.election.state = SmState::NotActive;
                self.election.master = None;
                self.election.next_poll = None;
            }
            SmInfoControl::Discover if self.election.state != SmState::Master => {
                self.election.state = SmState::Discovering;
                self.election.master = None;
                self.election.next_poll = None;
                self.request_sweep(now, true);
            }
            // A disabled SM is woken into standby this way too (as OpenSM).
            SmInfoControl::Standby
                if matches!(
                    self.election.state,
                    SmState::Discovering | SmState::NotActive
                ) =>
            {
                let m = RemoteSm {
                    guid: from.guid,
                    lid: slid,
                    priority: from.priority,
                    state: from.sm_state,
                    act_count: from.act_count,
                    path: Vec::new(),
                };
                self.stop_activity();
                self.become_standby(now, m);
            }
            other => {
                tracing::debug!(?other, state = ?self.election.state, "SMInfo control ignored")
            }
        }
    }

    /// The answer to a Set(SMInfo) we sent: an accepted handover makes us a standby.
    pub(super) fn on_control_answer(&mut self, now: Nanos, control: u32, to: Guid, s: &smp::Repr) {
        let handover = control == u32::from(SmInfoControl::Handover);
        if !handover || self.election.handing_to != Some(to) {
            return;
        }
        let info = s.attribute::<sm_info::Repr>().ok();
        if s.status != MadStatus::OK || info.is_none_or(|i| i.guid != to) {
            tracing::warn!(to = %to, status = s.status.0, "handover refused; staying master");
            self.election.handing_to = None;
            return;
        }
        let Some(known) = self.election.remote.iter().find(|r| r.guid == to).cloned() else {
            return;
        };
        tracing::info!(to = %to, "handover accepted");
        self.stand_down(
            now,
            RemoteSm {
                state: SmState::Master,
                ..known
            },
        );
    }

    /// A light sweep asks every SM found before for its SMInfo: another master, or a
    /// better SM ready to take over, calls for a heavy sweep (and the election in it).
    pub(super) fn light_sm_checks(&mut self, now: Nanos) {
        if self.election.state != SmState::Master {
            return;
        }
        let known: Vec<RemoteSm> = self
            .election
            .remote
            .iter()
            .filter(|r| r.guid != self.own_guid)
            .cloned()
            .collect();
        for r in known {
            let _ = self.send_sm_info(now, Purpose::LightSmInfo, Method::Get, 0, &r);
        }
    }

    /// A known SM's SMInfo during a light sweep.
    pub(super) fn on_light_sm_info(&mut self, now: Nanos, s: &smp::Repr) {
        let Ok(i) = s.attribute::<sm_info::Repr>() else {
            return;
        };
        if s.status != MadStatus::OK || i.guid == self.own_guid {
            return;
        }
        if let Some(r) = self.election.remote.iter_mut().find(|r| r.guid == i.guid) {
            r.state = i.sm_state;
            r.priority = i.priority;
            r.act_count = i.act_count;
            let infos = self.remote_sm_infos();
            self.sa.set_remote_sms(infos);
        }
        let better = outranks(i.priority, i.guid, self.p.sm_priority, self.own_guid);
        let other_master = i.sm_state == SmState::Master;
        let ready = i.sm_state == SmState::Standby && better;
        if (other_master || ready) && self.election.handing_to != Some(i.guid) {
            tracing::info!(sm = %i.guid, state = ?i.sm_state, priority = i.priority, "SM change seen; heavy sweep");
            self.request_sweep(now, true);
        }
    }

    /// A master that handed the subnet over stops sweeping and polls the new master.
    fn stand_down(&mut self, now: Nanos, new: RemoteSm) {
        self.stop_activity();
        self.become_standby(now, new);
    }

    /// Drops the sweep in progress and what it had in flight.
    fn stop_activity(&mut self) {
        self.reqs.clear();
        self.mcast.forget_in_flight();
        self.phase = Phase::Idle;
        self.next_light = None;
        self.next_heavy = None;
        self.resweep = false;
        self.up = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priority_then_lower_guid_wins() {
        assert!(outranks(5, Guid(9), 4, Guid(1)));
        assert!(!outranks(4, Guid(1), 5, Guid(9)));
        assert!(outranks(3, Guid(1), 3, Guid(2)));
        assert!(!outranks(3, Guid(2), 3, Guid(1)));
        assert!(!outranks(3, Guid(2), 3, Guid(2)));
    }
}
