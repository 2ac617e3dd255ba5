//! Several SMs on one simulated fabric, in virtual time: the election (the better SM is
//! master, the other stands by and programs nothing), failover when the master dies, and
//! handover to a better SM that comes later.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use sm_core::fabric::{Fabric, PortIdx};
use sm_core::generate::{GenSpec, generate};
use sm_core::lid::LidStore;
use sm_daemon::core::Params;
use sm_daemon::transport::sim::Nanos;
use sm_daemon::transport::sim::SimDriver;
use sm_mad::sm_info::{self, SmInfoControl, SmState};
use sm_mad::smp::{self, Route};
use sm_mad::{Guid, Lid, MadStatus, Method, Tid, attr};
use sm_sim::SimConfig;
use sm_sim::trace::AllPairsOptions;
use support::all_pairs_delivered;

const SECOND: Nanos = 1_000_000_000;

/// A two-level fat-tree of radix 6: 9 switches, 18 hosts, every CA port cabled.
fn fabric() -> Fabric {
    generate(&serde_json::from_str::<GenSpec>(r#"{"family":"fat-tree2","radix":6}"#).unwrap())
        .unwrap()
}

/// Linked CA ports, in port order.
fn ca_ports(f: &Fabric) -> Vec<PortIdx> {
    f.cas()
        .flat_map(|n| f.node_ports(n))
        .filter(|&p| f.port(p).remote.is_some())
        .collect()
}

fn params(priority: u8) -> Params {
    Params {
        sm_priority: priority,
        poll_interval: std::time::Duration::from_nanos(SECOND),
        poll_retries: 3,
        ..Params::default()
    }
}

/// Client reregistrations each CA port has received.
fn reregistrations(d: &SimDriver, f: &Fabric) -> Vec<u32> {
    ca_ports(f)
        .iter()
        .map(|&p| d.sim.port(p).reregistrations)
        .collect()
}

/// `sm` (the driver's own SM) on the first CA port with priority `own`; one peer on the last
/// CA port with priority `peer`, started first and brought up alone.
fn peer_master_then_sm(own: u8, peer: u8) -> (SimDriver, Fabric) {
    let f = fabric();
    let cas = ca_ports(&f);
    let mut d = SimDriver::new(
        &f,
        cas[0],
        params(own),
        LidStore::new(),
        SimConfig::default(),
    );
    d.add_sm(*cas.last().unwrap(), params(peer), LidStore::new());
    d.start_peer(0);
    assert!(
        d.run_while(10 * SECOND, |d| d.peers[0].sm.is_up()),
        "the first SM brings the subnet up"
    );
    assert_eq!(d.peers[0].sm.sm_state(), SmState::Master);
    all_pairs_delivered(&d, "first master");
    d.start();
    (d, f)
}

fn port_guid(f: &Fabric, p: PortIdx) -> Guid {
    f.port(p).guid
}

#[test]
fn a_lesser_sm_stands_by_and_programs_nothing() {
    let (mut d, f) = peer_master_then_sm(0, 5);
    let master_guid = port_guid(&f, *ca_ports(&f).last().unwrap());
    assert!(d.run_while(10 * SECOND, |d| d.sm.sm_state() != SmState::Discovering));
    assert_eq!(d.sm.sm_state(), SmState::Standby);
    assert_eq!(d.sm.master().map(|m| m.guid), Some(master_guid));
    assert!(!d.sm.is_up(), "a standby does not claim the subnet");
    assert!(d.sm.lfts().is_none(), "a standby computes no tables");
    // It sent its discovery and nothing more: every SMP it sent was answered without a Set.
    let sent_after_election = d.sm.mad_counts().sent;
    // Polling keeps the standby a standby while the master answers.
    d.run_while(10 * SECOND, |_| false);
    assert_eq!(d.sm.sm_state(), SmState::Standby);
    assert_eq!(d.peers[0].sm.sm_state(), SmState::Master);
    let polls = d.sm.mad_counts().sent - sent_after_election;
    assert!(
        (8..=12).contains(&polls),
        "one poll a second for 10 s, got {polls}"
    );
    all_pairs_delivered(&d, "with a standby");
    // The master asked each CA's clients to register once, when it became master; the
    // standby asked nothing.
    assert!(reregistrations(&d, &f).iter().all(|&n| n == 1));
}

#[test]
fn the_standby_takes_over_when_the_master_dies() {
    let (mut d, f) = peer_master_then_sm(0, 5);
    assert!(d.run_while(10 * SECOND, |d| d.sm.sm_state() == SmState::Standby));
    let lids_before: Vec<_> = ca_ports(&f)
        .iter()
        .map(|&p| d.sim.port(p).info.lid)
        .collect();
    assert!(reregistrations(&d, &f).iter().all(|&n| n == 1));
    d.stop_peer(0);
    let died = d.now();
    assert!(
        d.run_while(30 * SECOND, |d| d.sm.is_up()),
        "the standby brought the subnet up"
    );
    let took = d.now() - died;
    assert_eq!(d.sm.sm_state(), SmState::Master);
    // Three polls missed, a second apart, each one SMP that times out after 200 ms: the
    // third miss comes 2.2 s to 3.2 s after the master died, then one sweep.
    assert!(
        (2_200_000_000..3_500_000_000).contains(&took),
        "took over after {took} ns"
    );
    all_pairs_delivered(&d, "after failover");
    let lids_after: Vec<_> = ca_ports(&f)
        .iter()
        .map(|&p| d.sim.port(p).info.lid)
        .collect();
    assert_eq!(lids_before, lids_after, "the new master keeps the LIDs");
    // The new master's SA knows nothing of the old one's registrations: every client is
    // asked to register again, once.
    assert!(
        reregistrations(&d, &f).iter().all(|&n| n == 2),
        "{:?}",
        reregistrations(&d, &f)
    );
    d.run_while(30 * SECOND, |_| false);
    assert!(reregistrations(&d, &f).iter().all(|&n| n == 2));
}

#[test]
fn a_better_sm_that_comes_later_is_handed_the_subnet() {
    let (mut d, f) = peer_master_then_sm(7, 2);
    let new_guid = port_guid(&f, ca_ports(&f)[0]);
    let old_guid = port_guid(&f, *ca_ports(&f).last().unwrap());
    assert!(
        d.run_while(30 * SECOND, |d| d.sm.is_up()
            && d.peers[0].sm.sm_state() == SmState::Standby),
        "handover: ours {:?}, peer {:?}",
        d.sm.sm_state(),
        d.peers[0].sm.sm_state()
    );
    assert_eq!(d.sm.sm_state(), SmState::Master);
    assert_eq!(d.peers[0].sm.master().map(|m| m.guid), Some(new_guid));
    assert!(d.sm.remote_sms().iter().any(|r| r.guid == old_guid));
    all_pairs_delivered(&d, "after handover");
    // Settled: the old master stays standby, polling the new one.
    d.run_while(5 * SECOND, |_| false);
    assert_eq!(d.peers[0].sm.sm_state(), SmState::Standby);
    assert_eq!(d.sm.sm_state(), SmState::Master);
}

#[test]
fn an_sm_without_our_sm_key_is_ignored_however_high_its_priority() {
    // A master at priority 2 comes up; a rogue at priority 15 with another SM_Key starts.
    let f = fabric();
    let cas = ca_ports(&f);
    let mut d = SimDriver::new(&f, cas[0], params(2), LidStore::new(), SimConfig::default());
    d.start();
    assert!(d.run_while(10 * SECOND, |d| d.sm.is_up()), "master up");
    let rogue = Params {
        sm_key: 0xbad,
        ..params(15)
    };
    d.add_sm(*cas.last().unwrap(), rogue, LidStore::new());
    d.start_peer(0);
    let mut reports = Vec::new();
    let end = d.now() + 20 * SECOND;
    // Half way, a heavy sweep (as after any fabric change) finds the rogue's port.
    let mut swept = false;
    while d.now() < end && d.step() {
        if !swept && d.now() > end - 10 * SECOND {
            swept = true;
            d.sm.request_sweep(sm_daemon::core::Instant::from_nanos(d.now()), true);
        }
        while let Some(e) = d.sm.poll_event() {
            if let sm_daemon::core::Event::SweepDone(r) = e {
                reports.push(r);
            }
        }
    }
    assert_eq!(
        d.sm.sm_state(),
        SmState::Master,
        "the master kept the subnet"
    );
    let rogue_guid = port_guid(&f, *cas.last().unwrap());
    // Shown in the reports of the sweeps that found it.
    let last = reports.last().expect("a sweep found the rogue");
    assert_eq!(last.untrusted_sms, vec![rogue_guid.to_string()], "{last:?}");
    assert!(
        d.sm.remote_sms().iter().all(|r| r.guid != rogue_guid),
        "the rogue is not counted as an SM: {:?}",
        d.sm.remote_sms()
    );
    assert!(d.sm.is_up());
    all_pairs_delivered(&d, "with a rogue SM present");
}

#[test]
fn equal_priorities_elect_the_lower_guid() {
    let f = fabric();
    let cas = ca_ports(&f);
    let (a, b) = (cas[0], *cas.last().unwrap());
    let mut d = SimDriver::new(&f, a, params(3), LidStore::new(), SimConfig::default());
    d.add_sm(b, params(3), LidStore::new());
    // Both start at once.
    d.start();
    d.start_peer(0);
    assert!(d.run_while(20 * SECOND, |d| {
        d.sm.sm_state() != SmState::Discovering && d.peers[0].sm.sm_state() != SmState::Discovering
    }));
    let (winner, loser) = if port_guid(&f, a).0 < port_guid(&f, b).0 {
        (&d.sm, &d.peers[0].sm)
    } else {
        (&d.peers[0].sm, &d.sm)
    };
    assert_eq!(winner.sm_state(), SmState::Master);
    assert_eq!(loser.sm_state(), SmState::Standby);
    let winner_up = winner.is_up();
    assert!(
        winner_up || d.run_while(10 * SECOND, |d| d.sm.is_up() || d.peers[0].sm.is_up()),
        "the master brings the subnet up"
    );
    all_pairs_delivered(&d, "after a simultaneous start");
}

/// Sends `req` from a raw endpoint at `port` to the SM at `lid` and returns its answer.
fn ask_sm(d: &mut SimDriver, client: sm_sim::EndpointId, lid: Lid, req: &smp::Repr) -> smp::Repr {
    d.sim.send(client, lid, &req.to_bytes().unwrap()).unwrap();
    let mut answer = None;
    d.run_while(SECOND, |_| false);
    while let Some(m) = d.sim.recv(client) {
        let s = smp::Repr::parse(&m.mad).unwrap();
        if s.tid == req.tid {
            answer = Some(s);
        }
    }
    answer.expect("the SM answered")
}

fn sm_info_set(tid: u64, control: SmInfoControl, key: u64, state: SmState) -> smp::Repr {
    let mut r = smp::Repr::request(
        Method::Set,
        Tid(tid),
        attr::SM_INFO,
        u32::from(control),
        Route::Lid,
    );
    r.set_attribute(&sm_info::Repr {
        guid: Guid(0x77),
        sm_key: key,
        act_count: 0,
        priority: 15,
        sm_state: state,
    })
    .unwrap();
    r
}

#[test]
fn sm_info_answers_and_set_checks() {
    let f = fabric();
    let cas = ca_ports(&f);
    let mut d = SimDriver::new(&f, cas[0], params(4), LidStore::new(), SimConfig::default());
    d.start();
    assert!(d.run_while(10 * SECOND, |d| d.sm.is_up()));
    let client = d.sim.attach(*cas.last().unwrap());
    let lid = d.sm.own_lid();

    // Get: our SMInfo, with the SM_Key (no M_Key in use).
    let get = smp::Repr::request(Method::Get, Tid(0x900), attr::SM_INFO, 0, Route::Lid);
    let a = ask_sm(&mut d, client, lid, &get);
    let i: sm_info::Repr = a.attribute().unwrap();
    assert_eq!(a.status, MadStatus::OK);
    assert_eq!(
        (i.guid, i.sm_key, i.priority, i.sm_state),
        (port_guid(&f, cas[0]), 1, 4, SmState::Master)
    );

    // A Disable with the wrong SM_Key is ignored and the key is not shown.
    let a = ask_sm(
        &mut d,
        client,
        lid,
        &sm_info_set(0x901, SmInfoControl::Disable, 9, SmState::Master),
    );
    let i: sm_info::Repr = a.attribute().unwrap();
    assert_eq!((i.sm_key, i.sm_state), (0, SmState::Master));
    assert_eq!(d.sm.sm_state(), SmState::Master);

    // A Handover from an SM that is not master is illegal: "invalid field", nothing done.
    let a = ask_sm(
        &mut d,
        client,
        lid,
        &sm_info_set(0x902, SmInfoControl::Handover, 1, SmState::Standby),
    );
    assert_eq!(a.status, MadStatus::INVALID_FIELD);
    assert_eq!(d.sm.sm_state(), SmState::Master);

    // A keyed Disable from a master: NotActive, and the SM stops sweeping.
    let a = ask_sm(
        &mut d,
        client,
        lid,
        &sm_info_set(0x903, SmInfoControl::Disable, 1, SmState::Master),
    );
    assert_eq!(a.status, MadStatus::OK);
    assert_eq!(d.sm.sm_state(), SmState::NotActive);
    let sent = d.sm.mad_counts().sent;
    d.run_while(30 * SECOND, |_| false);
    assert_eq!(d.sm.mad_counts().sent, sent, "a disabled SM sends nothing");

    // A keyed Standby wakes it into standby, polling the sender (which never answers as a
    // master here, so it takes the subnet back).
    let a = ask_sm(
        &mut d,
        client,
        lid,
        &sm_info_set(0x904, SmInfoControl::Standby, 1, SmState::Master),
    );
    assert_eq!(a.status, MadStatus::OK);
    assert_eq!(d.sm.sm_state(), SmState::Standby);
    assert!(d.run_while(30 * SECOND, |d| d.sm.is_up()));
    assert_eq!(d.sm.sm_state(), SmState::Master);
}

#[test]
fn a_master_cut_off_and_back_takes_its_subnet_back() {
    // The better SM (priority 9, a peer) is master; ours (1) stands by.
    let (mut d, f) = peer_master_then_sm(1, 9);
    assert!(d.run_while(10 * SECOND, |d| d.sm.sm_state() == SmState::Standby));
    let master_port = *ca_ports(&f).last().unwrap();
    // Its cable is pulled: it cannot reach the subnet, nor the standby it.
    d.sim.link_down(master_port);
    assert!(
        d.run_while(30 * SECOND, |d| d.sm.is_up()),
        "the standby took over"
    );
    assert_eq!(d.sm.sm_state(), SmState::Master);
    // The cable is back: the two masters meet, and the lesser (ours) yields.
    d.sim.link_up(master_port);
    // Ours repairs the link, sees a port that claims an SM come back and sweeps for the
    // election; it yields once and stays standby while the returning master's stale tables
    // leave its LID unrouted for a while (its polls fall back to the directed route).
    let t0 = d.now();
    let mut our_sweeps = 0;
    while d.now() < t0 + 20 * SECOND && d.step() {
        while let Some(e) = d.sm.poll_event() {
            our_sweeps += usize::from(matches!(e, sm_daemon::core::Event::SweepDone(_)));
        }
        while d.peers[0].sm.poll_event().is_some() {}
    }
    assert!(our_sweeps <= 2, "ours swept again and again: {our_sweeps}");
    let active = |d: &SimDriver| {
        d.sim
            .check_all_pairs(&AllPairsOptions::default())
            .all_delivered()
    };
    assert!(
        d.run_while(60 * SECOND, |d| d.sm.sm_state() == SmState::Standby
            && d.peers[0].sm.sm_state() == SmState::Master
            && active(d)),
        "ours {:?}, theirs {:?} up {}",
        d.sm.sm_state(),
        d.peers[0].sm.sm_state(),
        d.peers[0].sm.is_up()
    );
    assert_eq!(d.peers[0].sm.sm_state(), SmState::Master);
    all_pairs_delivered(&d, "after the masters met");
}
