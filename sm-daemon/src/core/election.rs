//! Which SM runs the subnet (IBA 14.4), as a state machine of its own: it is told what
//! discovery found, what polls and SMInfo requests brought, and answers with [`Action`]s
//! that the core carries out (send an SMInfo, sweep, stop, forget what it programmed).
//!
//! Every heavy sweep asks each end port whose PortInfo.CapabilityMask has IsSM for its SMInfo.
//! An SM that is Discovering becomes Standby when it finds a master or a better SM (higher
//! priority, then lower port GUID), else Master. A master that finds a better standby hands
//! the subnet over (Set(SMInfo) Handover; it stands by once the Set is answered). A standby
//! polls the master every `poll_interval` (one SMP each, not retried); after `poll_retries`
//! polls in a row go unanswered, or as soon as the master says it is no longer master, it
//! sweeps again as Discovering, and the best remaining SM takes over.

use super::model::DrPath;
use std::time::Duration;

use sm_mad::sm_info::{self, SmInfoControl, SmState};
use sm_mad::{Guid, Lid, MadStatus, Method};

use super::time::Instant;

/// Another SM, as its SMInfo told us.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteSm {
    pub guid: Guid,
    pub lid: Lid,
    pub priority: u8,
    pub state: SmState,
    pub act_count: u32,
    /// Directed route to its port (empty when only its LID is known).
    pub(super) path: DrPath,
}

/// Why an SMInfo goes to another SM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ask {
    /// A standby's poll of the master (one try: a miss is what `poll_retries` counts).
    Poll,
    /// Set(SMInfo) with a control.
    Control(SmInfoControl),
    /// A light sweep's look at an SM found before.
    Light,
}

/// What the election asks of the core.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Action {
    /// Send `to` an SMInfo: a Get, or for [`Ask::Control`] a Set.
    Ask {
        to: RemoteSm,
        why: Ask,
    },
    /// Trap 144 to the master at `lid`: a better standby asks for the subnet (as OpenSM).
    AskForSubnet {
        lid: Lid,
    },
    /// Sweep (heavy).
    Sweep,
    /// Drop the sweep in progress and everything in flight.
    StopActivity,
    /// The subnet is another SM's: no sweeps, not up.
    StandBy,
    /// Another SM may have programmed the fabric: nothing held is known.
    ForgetProgrammed,
    /// Poll the master at that time.
    PollAt(Instant),
    CancelPoll,
    /// The list of SMs the SA shows changed.
    PublishSms,
}

/// What the election decided at the end of a discovery.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Decision {
    /// Program the subnet.
    Master,
    /// Leave it to this SM.
    Standby(RemoteSm),
}

/// The answer to an SMInfo Get or Set from another SM.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Reply {
    pub(super) status: MadStatus,
    /// Our SM_Key may be shown.
    pub(super) show_key: bool,
    pub(super) actions: Vec<Action>,
}

/// An SMInfo Get or Set from another SM.
#[derive(Debug, Clone, Copy)]
pub(super) struct Request {
    pub(super) method: Method,
    /// The control of a Set.
    pub(super) modifier: u32,
    /// The sender's SMInfo, if it parsed.
    pub(super) theirs: Option<sm_info::Repr>,
    pub(super) slid: Lid,
    /// The requester passed M_Key checking (it may see our SM_Key, as OpenSM shows it).
    pub(super) m_key_ok: bool,
}

/// Where the election stands.
#[derive(Debug, Clone)]
pub(super) struct Election {
    state: SmState,
    priority: u8,
    sm_key: u64,
    poll_interval: Duration,
    poll_retries: u32,
    /// The master a standby polls.
    master: Option<RemoteSm>,
    /// Polls in a row the master did not answer as master.
    misses: u32,
    /// The standby the subnet is being handed to (until it answers).
    handing_to: Option<Guid>,
    /// The other SMs the last heavy sweep found.
    remote: Vec<RemoteSm>,
}

/// Whether another SM's SMInfo proves it holds our SM_Key (any SM counts when ours is 0, as
/// OpenSM): an SM that does not is ignored, never stood by for nor handed the subnet.
pub(super) fn key_matches(ours: u64, theirs: &sm_info::Repr) -> bool {
    ours == 0 || theirs.sm_key == ours
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

impl Election {
    pub(super) fn new(
        priority: u8,
        sm_key: u64,
        poll_interval: Duration,
        poll_retries: u32,
    ) -> Self {
        Election {
            state: SmState::Discovering,
            priority,
            sm_key,
            poll_interval,
            poll_retries,
            master: None,
            misses: 0,
            handing_to: None,
            remote: Vec::new(),
        }
    }

    pub(super) fn state(&self) -> SmState {
        self.state
    }

    pub(super) fn is_master(&self) -> bool {
        self.state == SmState::Master
    }

    /// A standby or disabled SM does not sweep: the subnet is another's.
    pub(super) fn stands_aside(&self) -> bool {
        matches!(self.state, SmState::Standby | SmState::NotActive)
    }

    pub(super) fn master(&self) -> Option<&RemoteSm> {
        self.master.as_ref()
    }

    pub(super) fn remote(&self) -> &[RemoteSm] {
        &self.remote
    }

    /// Our SMInfo; the SM_Key only when `show_key`.
    pub(super) fn own_info(&self, me: Guid, show_key: bool, act_count: u32) -> sm_info::Repr {
        sm_info::Repr {
            guid: me,
            sm_key: if show_key { self.sm_key } else { 0 },
            act_count,
            priority: self.priority,
            sm_state: self.state,
        }
    }

    /// The other SMs as SMInfo with their LIDs (for the SA), SM_Keys hidden.
    pub(super) fn remote_infos(&self, me: Guid) -> Vec<(Lid, sm_info::Repr)> {
        self.remote
            .iter()
            .filter(|r| r.guid != me && r.lid.0 != 0)
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

    /// The election at the end of a heavy sweep's discovery.
    pub(super) fn decide(&mut self, found: &[RemoteSm], me: Guid) -> (Decision, Vec<Action>) {
        let mut actions = Vec::new();
        let mut others: Vec<&RemoteSm> = found
            .iter()
            .filter(|r| r.guid != me && r.state != SmState::NotActive)
            .collect();
        // Best first: the higher priority, then the lower GUID.
        others.sort_by_key(|r| (std::cmp::Reverse(r.priority), r.guid.0));
        self.remote = found.to_vec();
        let better = |r: &RemoteSm| outranks(r.priority, r.guid, self.priority, me);
        let master = others.iter().find(|r| r.state == SmState::Master);
        let decision = match self.state {
            SmState::Master => {
                // Two masters (subnets merged): the lesser one yields.
                if let Some(m) = master.filter(|m| better(m)) {
                    return (Decision::Standby((*m).clone()), actions);
                }
                // The other master may have programmed the switches meanwhile.
                if master.is_some() {
                    actions.push(Action::ForgetProgrammed);
                }
                // A better standby gets the subnet, once the tables are in place.
                if let Some(b) = others
                    .iter()
                    .find(|r| better(r) && r.state == SmState::Standby)
                {
                    if self.handing_to != Some(b.guid) {
                        self.handing_to = Some(b.guid);
                        tracing::info!(to = %b.guid, priority = b.priority, "handing the subnet over");
                        actions.push(Action::Ask {
                            to: (*b).clone(),
                            why: Ask::Control(SmInfoControl::Handover),
                        });
                    }
                }
                Decision::Master
            }
            _ => match master.or_else(|| others.iter().find(|r| better(r))) {
                Some(m) => Decision::Standby((*m).clone()),
                None => Decision::Master,
            },
        };
        (decision, actions)
    }

    /// Becomes master (before programming).
    pub(super) fn become_master(&mut self) -> Vec<Action> {
        let mut actions = vec![Action::CancelPoll];
        if self.state != SmState::Master {
            tracing::info!(priority = self.priority, "entering MASTER state");
            actions.push(Action::ForgetProgrammed);
        }
        self.state = SmState::Master;
        self.master = None;
        self.misses = 0;
        actions
    }

    /// Becomes a standby of `master`: nothing is programmed; the master is polled.
    pub(super) fn become_standby(&mut self, now: Instant, master: RemoteSm) -> Vec<Action> {
        tracing::info!(
            master = %master.guid,
            lid = %master.lid,
            priority = master.priority,
            "entering STANDBY state"
        );
        self.state = SmState::Standby;
        self.handing_to = None;
        self.misses = 0;
        self.master = Some(master);
        vec![Action::StandBy, Action::PollAt(now + self.poll_interval)]
    }

    /// The poll of the master is due: the SMInfo Get to send (with the next poll's time).
    pub(super) fn poll(&mut self, now: Instant) -> Vec<Action> {
        if self.state != SmState::Standby {
            return Vec::new();
        }
        // A fixed cadence: the next poll is due an interval after this one was sent.
        let mut actions = vec![Action::PollAt(now + self.poll_interval)];
        if let Some(mut m) = self.master.clone() {
            // After a miss, the next poll goes by directed route: a master whose LID the
            // switches no longer route (stale tables after a partition) is still alive.
            if self.misses % 2 == 1 && !m.path.is_empty() {
                m.lid = Lid(0);
            }
            actions.push(Action::Ask {
                to: m,
                why: Ask::Poll,
            });
        }
        actions
    }

    /// The master's answer to a poll (`None`: unanswered or unsendable).
    pub(super) fn on_poll(&mut self, answer: Option<SmState>, me: Guid) -> Vec<Action> {
        if self.state != SmState::Standby {
            return Vec::new();
        }
        let mut actions = Vec::new();
        match answer {
            Some(SmState::Master) => {
                self.misses = 0;
                // A standby that outranks the master tells it so after every poll.
                if let Some(m) = &self.master {
                    if m.lid.0 != 0 && outranks(self.priority, me, m.priority, m.guid) {
                        actions.push(Action::AskForSubnet { lid: m.lid });
                    }
                }
            }
            // Not (or not yet) master: counts as a miss, so a better SM that never takes
            // over does not keep the subnet without one.
            Some(SmState::Discovering) | None => self.misses += 1,
            Some(_) => self.misses = self.poll_retries,
        }
        if self.misses >= self.poll_retries {
            tracing::warn!(master = ?self.master.as_ref().map(|m| m.guid), "master lost; discovering");
            self.state = SmState::Discovering;
            self.master = None;
            actions.push(Action::CancelPoll);
            actions.push(Action::Sweep);
        }
        actions
    }

    /// A Set(SMInfo) we sent went unanswered: a handover may be tried again by a later sweep.
    pub(super) fn on_control_lost(&mut self, to: Guid) {
        if self.handing_to == Some(to) {
            tracing::warn!(to = %to, "handover unanswered; staying master");
            self.handing_to = None;
        }
    }

    /// The answer to a Set(SMInfo) we sent: an accepted handover makes us a standby.
    pub(super) fn on_control_answer(
        &mut self,
        now: Instant,
        control: SmInfoControl,
        to: Guid,
        status: MadStatus,
        answered_by: Option<Guid>,
    ) -> Vec<Action> {
        if control != SmInfoControl::Handover || self.handing_to != Some(to) {
            return Vec::new();
        }
        if status != MadStatus::OK || answered_by != Some(to) {
            tracing::warn!(to = %to, status = status.0, "handover refused; staying master");
            self.handing_to = None;
            return Vec::new();
        }
        let Some(known) = self.remote.iter().find(|r| r.guid == to).cloned() else {
            return Vec::new();
        };
        tracing::info!(to = %to, "handover accepted");
        self.stand_down(
            now,
            RemoteSm {
                state: SmState::Master,
                ..known
            },
        )
    }

    /// Get or Set(SMInfo) from another SM.
    pub(super) fn on_request(&mut self, now: Instant, req: Request, me: Guid) -> Reply {
        let Request {
            method,
            modifier,
            theirs,
            slid,
            m_key_ok,
        } = req;
        let mut reply = Reply {
            status: MadStatus::OK,
            show_key: m_key_ok,
            actions: Vec::new(),
        };
        if method == Method::Set {
            let keyed = theirs.is_some_and(|t| t.sm_key == self.sm_key);
            let legal = theirs.is_some_and(|t| set_is_legal(modifier, t.sm_state));
            if !keyed {
                tracing::debug!(from = %slid, "Set(SMInfo) with a wrong SM_Key ignored");
                reply.show_key = false;
            } else if !legal {
                tracing::debug!(from = %slid, control = modifier, "Set(SMInfo) not legal from its sender's state");
                reply.status = MadStatus::INVALID_FIELD;
            } else if let Some(from) = theirs {
                reply.actions = self.on_control(now, slid, modifier, from);
            }
        } else if let Some(t) = theirs.filter(|t| {
            self.state == SmState::Master
                && matches!(t.sm_state, SmState::Standby | SmState::Discovering)
                && t.guid.0 != 0
                && t.guid != me
                && self.handing_to != Some(t.guid)
                && outranks(t.priority, t.guid, self.priority, me)
        }) {
            // A better SM is asking: a heavy sweep finds it and hands the subnet over.
            tracing::info!(from = %t.guid, priority = t.priority, "a better SM appeared");
            reply.actions.push(Action::Sweep);
        }
        reply
    }

    fn on_control(
        &mut self,
        now: Instant,
        slid: Lid,
        modifier: u32,
        from: sm_info::Repr,
    ) -> Vec<Action> {
        let path_of = |remote: &[RemoteSm], g: Guid| {
            remote
                .iter()
                .find(|r| r.guid == g)
                .map(|r| r.path)
                .unwrap_or_default()
        };
        match SmInfoControl::from(modifier) {
            SmInfoControl::Handover
                if matches!(self.state, SmState::Standby | SmState::Discovering) =>
            {
                // The answer to the Set tells the old master it is done (it stands by on
                // it, as OpenSM does); no Acknowledge is sent, which OpenSM would refuse
                // from a master.
                tracing::info!(from = %from.guid, "handover received");
                let mut actions = self.become_master();
                actions.push(Action::Sweep);
                actions
            }
            SmInfoControl::Acknowledge if self.handing_to == Some(from.guid) => {
                let new = RemoteSm {
                    guid: from.guid,
                    lid: slid,
                    priority: from.priority,
                    state: SmState::Master,
                    act_count: from.act_count,
                    path: path_of(&self.remote, from.guid),
                };
                self.stand_down(now, new)
            }
            SmInfoControl::Disable => {
                tracing::info!(from = %from.guid, "disabled by another SM: NOTACTIVE");
                self.state = SmState::NotActive;
                self.master = None;
                vec![Action::StopActivity, Action::StandBy, Action::CancelPoll]
            }
            SmInfoControl::Discover if self.state != SmState::Master => {
                self.state = SmState::Discovering;
                self.master = None;
                vec![Action::CancelPoll, Action::Sweep]
            }
            // A disabled SM is woken into standby this way too (as OpenSM).
            SmInfoControl::Standby
                if matches!(self.state, SmState::Discovering | SmState::NotActive) =>
            {
                let m = RemoteSm {
                    guid: from.guid,
                    lid: slid,
                    priority: from.priority,
                    state: from.sm_state,
                    act_count: from.act_count,
                    path: DrPath::new(),
                };
                self.stand_down(now, m)
            }
            other => {
                tracing::debug!(?other, state = ?self.state, "SMInfo control ignored");
                Vec::new()
            }
        }
    }

    /// A light sweep asks every SM found before for its SMInfo.
    pub(super) fn light_checks(&self, me: Guid) -> Vec<Action> {
        if self.state != SmState::Master {
            return Vec::new();
        }
        self.remote
            .iter()
            .filter(|r| r.guid != me)
            .map(|r| Action::Ask {
                to: r.clone(),
                why: Ask::Light,
            })
            .collect()
    }

    /// A known SM's SMInfo during a light sweep: another master, or a better SM ready to
    /// take over, calls for a heavy sweep (and the election in it).
    pub(super) fn on_light_info(&mut self, info: sm_info::Repr, me: Guid) -> Vec<Action> {
        if info.guid == me {
            return Vec::new();
        }
        let mut actions = Vec::new();
        if let Some(r) = self.remote.iter_mut().find(|r| r.guid == info.guid) {
            r.state = info.sm_state;
            r.priority = info.priority;
            r.act_count = info.act_count;
            actions.push(Action::PublishSms);
        }
        let better = outranks(info.priority, info.guid, self.priority, me);
        let other_master = info.sm_state == SmState::Master;
        let ready = info.sm_state == SmState::Standby && better;
        if (other_master || ready) && self.handing_to != Some(info.guid) {
            tracing::info!(sm = %info.guid, state = ?info.sm_state, priority = info.priority, "SM change seen; heavy sweep");
            actions.push(Action::Sweep);
        }
        actions
    }

    /// A master that handed the subnet over (or is told to stand by) stops sweeping and
    /// polls the new master.
    fn stand_down(&mut self, now: Instant, new: RemoteSm) -> Vec<Action> {
        let mut actions = vec![Action::StopActivity];
        actions.extend(self.become_standby(now, new));
        actions
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: Guid = Guid(5);

    fn sm(guid: u64, priority: u8, state: SmState) -> RemoteSm {
        RemoteSm {
            guid: Guid(guid),
            lid: Lid(guid as u16),
            priority,
            state,
            act_count: 0,
            path: DrPath::try_from(&[1u8][..]).unwrap(),
        }
    }

    #[test]
    fn priority_then_lower_guid_wins() {
        assert!(outranks(5, Guid(9), 4, Guid(1)));
        assert!(!outranks(4, Guid(1), 5, Guid(9)));
        assert!(outranks(3, Guid(1), 3, Guid(2)));
        assert!(!outranks(3, Guid(2), 3, Guid(1)));
        assert!(!outranks(3, Guid(2), 3, Guid(2)));
    }

    #[test]
    fn a_discovering_sm_stands_by_for_a_master_or_a_better_sm() {
        let mut e = Election::new(3, 1, Duration::from_secs(1), 2);
        let (d, _) = e.decide(&[sm(9, 0, SmState::Master)], ME);
        assert_eq!(d, Decision::Standby(sm(9, 0, SmState::Master)));
        let (d, _) = e.decide(&[sm(9, 4, SmState::Discovering)], ME);
        assert_eq!(d, Decision::Standby(sm(9, 4, SmState::Discovering)));
        let (d, _) = e.decide(&[sm(9, 3, SmState::Standby)], ME);
        assert_eq!(
            d,
            Decision::Master,
            "equal priority: the lower GUID (ours) wins"
        );
    }

    #[test]
    fn a_master_hands_over_to_a_better_standby_once() {
        let mut e = Election::new(3, 1, Duration::from_secs(1), 2);
        e.become_master();
        let better = sm(9, 7, SmState::Standby);
        let (d, actions) = e.decide(std::slice::from_ref(&better), ME);
        assert_eq!(d, Decision::Master);
        assert_eq!(
            actions,
            vec![Action::Ask {
                to: better.clone(),
                why: Ask::Control(SmInfoControl::Handover)
            }]
        );
        let (_, again) = e.decide(std::slice::from_ref(&better), ME);
        assert!(again.is_empty(), "one handover at a time");
        let t = Instant::from_nanos(10);
        let actions = e.on_control_answer(
            t,
            SmInfoControl::Handover,
            Guid(9),
            MadStatus::OK,
            Some(Guid(9)),
        );
        assert!(actions.contains(&Action::StopActivity));
        assert_eq!(e.state(), SmState::Standby);
        assert_eq!(e.master().map(|m| m.state), Some(SmState::Master));
    }

    #[test]
    fn a_standby_takes_over_after_missed_polls() {
        let mut e = Election::new(0, 1, Duration::from_secs(1), 2);
        let t = Instant::from_nanos(0);
        e.become_standby(t, sm(9, 5, SmState::Master));
        let poll = e.poll(t);
        assert!(poll.contains(&Action::PollAt(t + Duration::from_secs(1))));
        assert!(e.on_poll(Some(SmState::Master), ME).is_empty());
        assert!(e.on_poll(None, ME).is_empty());
        // The second poll after a miss goes by directed route.
        let Some(Action::Ask { to, .. }) = e.poll(t).into_iter().nth(1) else {
            panic!("a poll")
        };
        assert_eq!(to.lid, Lid(0));
        let actions = e.on_poll(None, ME);
        assert!(actions.contains(&Action::Sweep));
        assert_eq!(e.state(), SmState::Discovering);
    }

    #[test]
    fn sets_need_the_key_and_a_legal_sender() {
        let mut e = Election::new(0, 0x77, Duration::from_secs(1), 2);
        let t = Instant::from_nanos(0);
        let from = |key, state| sm_info::Repr {
            guid: Guid(9),
            sm_key: key,
            act_count: 0,
            priority: 1,
            sm_state: state,
        };
        let set = |theirs| Request {
            method: Method::Set,
            modifier: u32::from(SmInfoControl::Handover),
            theirs,
            slid: Lid(9),
            m_key_ok: true,
        };
        let r = e.on_request(t, set(Some(from(1, SmState::Master))), ME);
        assert!(!r.show_key && r.actions.is_empty(), "wrong key: ignored");
        let r = e.on_request(t, set(Some(from(0x77, SmState::Standby))), ME);
        assert_eq!(r.status, MadStatus::INVALID_FIELD);
        let r = e.on_request(t, set(Some(from(0x77, SmState::Master))), ME);
        assert!(r.actions.contains(&Action::Sweep));
        assert_eq!(e.state(), SmState::Master);
    }
}
