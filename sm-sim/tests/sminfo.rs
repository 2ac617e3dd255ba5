//! SMInfo between two SMs on two CA ports: a Get or Set(SMInfo) reaching a port where an
//! SM listens is handed to it, and its answer travels back by directed route (along the
//! return path, C14-13) or by LID.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use sm_mad::sm_info::{self, SmInfoControl, SmState};
use sm_mad::smp::{self, Route};
use sm_mad::{Guid, Lid, Method, Tid, attr};
use sm_sim::{EndpointId, Inbound, Sim, SimConfig};

fn info(guid: u64, state: SmState) -> sm_info::Repr {
    sm_info::Repr {
        guid: Guid(guid),
        sm_key: 0,
        act_count: 7,
        priority: 3,
        sm_state: state,
    }
}

/// The SM at `ep` answers the SMInfo request it received with its own SMInfo.
fn answer(sim: &mut Sim, ep: EndpointId, req: &Inbound, me: &sm_info::Repr) {
    let r = smp::Repr::parse(&req.mad).unwrap();
    assert_eq!(r.attr_id, attr::SM_INFO);
    let mut resp = r;
    resp.method = Method::GetResp;
    resp.set_attribute(me).unwrap();
    sim.reply(ep, req, &resp.to_bytes().unwrap()).unwrap();
}

fn run(sim: &mut Sim) {
    let t = sim.now() + 1_000_000;
    sim.advance(t);
}

#[test]
fn two_sms_exchange_sminfo_by_directed_route() {
    let f = fabric();
    let mut a = Sm::new(&f, SimConfig::default());
    let b = a.sim.attach(port(&f, "host-4", 1));
    let a_info = info(0x10_0001, SmState::Discovering);
    let b_info = info(0x10_0007, SmState::Standby);

    // A asks B along host-1 -> sw-a -> sw-b -> host-4.
    let tid = a.send(
        Lid::PERMISSIVE,
        smp::Repr::dr_get(Tid(0), attr::SM_INFO, 0, HCA4).unwrap(),
    );
    run(&mut a.sim);
    let req = a.sim.recv(b).expect("B gets the Get");
    assert_eq!(req.slid, Lid::PERMISSIVE);
    let r = smp::Repr::parse(&req.mad).unwrap();
    assert_eq!((r.method, r.tid), (Method::Get, tid));
    let Route::Directed(d) = r.route else {
        panic!()
    };
    assert_eq!(&d.return_path.0[1..4], &[1, 3, 1], "arrival ports");
    answer(&mut a.sim, b, &req, &b_info);
    run(&mut a.sim);
    let back = a.drain();
    assert_eq!(back.len(), 1);
    let resp = smp::Repr::parse(&back[0].mad).unwrap();
    assert_eq!((resp.method, resp.tid), (Method::GetResp, tid));
    let Route::Directed(d) = resp.route else {
        panic!()
    };
    assert!(d.direction);
    assert_eq!(d.hop_pointer, 0);
    assert_eq!(resp.attribute::<sm_info::Repr>().unwrap(), b_info);

    // And the other way: B asks A along host-4 -> sw-b -> sw-a -> host-1.
    let q = smp::Repr::dr_get(Tid(99), attr::SM_INFO, 0, &[1, 3, 1]).unwrap();
    a.sim
        .send(b, Lid::PERMISSIVE, &q.to_bytes().unwrap())
        .unwrap();
    run(&mut a.sim);
    let req = a.drain().pop().expect("A gets the Get");
    answer(&mut a.sim, a.ep, &req, &a_info);
    run(&mut a.sim);
    let resp = smp::Repr::parse(&a.sim.recv(b).unwrap().mad).unwrap();
    assert_eq!(resp.tid, Tid(99));
    assert_eq!(resp.attribute::<sm_info::Repr>().unwrap(), a_info);
}

#[test]
fn sminfo_by_lid_and_set_handover() {
    let f = fabric();
    let mut a = Sm::new(&f, SimConfig::default());
    a.bring_up();
    let b = a.sim.attach(port(&f, "host-4", 1));
    // B (LID 6) asks the master (LID 1) by LID.
    let q = smp::Repr::request(Method::Get, Tid(5), attr::SM_INFO, 0, Route::Lid);
    a.sim.send(b, Lid(1), &q.to_bytes().unwrap()).unwrap();
    run(&mut a.sim);
    let req = a.drain().pop().expect("A gets it");
    assert_eq!(req.slid, Lid(6));
    answer(&mut a.sim, a.ep, &req, &info(0x10_0001, SmState::Master));
    run(&mut a.sim);
    let m = a.sim.recv(b).unwrap();
    assert_eq!(m.slid, Lid(1));
    let resp = smp::Repr::parse(&m.mad).unwrap();
    assert_eq!((resp.method, resp.tid), (Method::GetResp, Tid(5)));
    assert_eq!(
        resp.attribute::<sm_info::Repr>().unwrap().sm_state,
        SmState::Master
    );

    // The master hands over by Set(SMInfo), LID-routed; B acknowledges.
    let mut set = smp::Repr::request(
        Method::Set,
        Tid(0),
        attr::SM_INFO,
        SmInfoControl::Handover.to_raw_value(),
        Route::Lid,
    );
    set.set_attribute(&info(0x10_0001, SmState::Master))
        .unwrap();
    let tid = a.send(Lid(6), set);
    run(&mut a.sim);
    let req = a.sim.recv(b).expect("B gets the Set");
    let r = smp::Repr::parse(&req.mad).unwrap();
    assert_eq!(
        SmInfoControl::from_raw_value(r.attr_mod),
        SmInfoControl::Handover
    );
    answer(&mut a.sim, b, &req, &info(0x10_0007, SmState::Master));
    run(&mut a.sim);
    let resp = a.drain();
    let resp = smp::Repr::parse(&resp[0].mad).unwrap();
    assert_eq!(resp.tid, tid);
}

#[test]
fn directed_route_with_lid_routed_ends() {
    let f = fabric();
    let mut a = Sm::new(&f, SimConfig::default());
    a.bring_up();
    let b = a.sim.attach(port(&f, "host-4", 1));
    // LID-routed to sw-a (LID 2), directed out of its port 5 to sw-b, LID-routed to
    // host-4 (DrDLID 6); the answer comes back to DrSLID 1.
    let mut q = smp::Repr::dr_get(Tid(0), attr::SM_INFO, 0, &[5]).unwrap();
    if let Route::Directed(d) = &mut q.route {
        d.dr_slid = Lid(1);
        d.dr_dlid = Lid(6);
    }
    let tid = a.send(Lid(2), q);
    run(&mut a.sim);
    let req = a.sim.recv(b).expect("B gets it");
    assert_eq!(req.slid, Lid(3), "the switch that ended the directed part");
    let r = smp::Repr::parse(&req.mad).unwrap();
    let Route::Directed(d) = r.route else {
        panic!()
    };
    assert_eq!(d.return_path.0[1], 5);
    answer(&mut a.sim, b, &req, &info(0x10_0007, SmState::Standby));
    run(&mut a.sim);
    let back = a.drain();
    assert_eq!(back.len(), 1);
    let resp = smp::Repr::parse(&back[0].mad).unwrap();
    assert_eq!((resp.method, resp.tid), (Method::GetResp, tid));
    // The same path to an agent: Get(NodeInfo) of host-4.
    let mut q = smp::Repr::dr_get(Tid(0), attr::NODE_INFO, 0, &[5]).unwrap();
    if let Route::Directed(d) = &mut q.route {
        d.dr_slid = Lid(1);
        d.dr_dlid = Lid(6);
    }
    let r = a.rpc(Lid(2), q).expect("answered");
    let ni: sm_mad::node_info::Repr = r.attribute().unwrap();
    assert_eq!(ni.local_port_num, 1);
}

#[test]
fn sminfo_to_a_port_without_sm_gets_no_answer() {
    let f = fabric();
    let mut a = Sm::new(&f, SimConfig::default());
    let before = a.sim.stats().dropped;
    assert!(
        a.dr(Method::Get, attr::SM_INFO, 0, HCA2, None).is_none(),
        "nobody listens on host-2"
    );
    assert_eq!(a.sim.stats().dropped, before + 1);
}
