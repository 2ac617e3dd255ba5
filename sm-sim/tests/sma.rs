//! The simulated fabric answers like ibsim's agents and the specification: directed routes,
//! LID routes through programmed tables, the port state machine, traps.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use sm_core::fabric::{Fabric, PortIdx};
use sm_core::read_topology_str;
use sm_mad::port_info::{self, PortState};
use sm_mad::smp::{self, Route};
use sm_mad::{
    Guid, Lid, MadStatus, Method, PortNum, Tid, attr, lft, node_info, notice, switch_info,
};
use sm_sim::{EndpointId, Sim, SimConfig};

fn fabric() -> Fabric {
    let net = include_str!("../../testdata/2sw-2path-4ca.net");
    read_topology_str(net, Path::new("2sw-2path-4ca.net"))
        .unwrap()
        .fabric
}

struct Bench {
    sim: Sim,
    ep: EndpointId,
    tid: u64,
}

impl Bench {
    fn new(f: &Fabric, at: Guid) -> Bench {
        let mut sim = Sim::new(f, SimConfig::default());
        let ep = sim.attach(f.port_by_guid(at).unwrap());
        Bench { sim, ep, tid: 0 }
    }

    fn rpc(&mut self, dlid: Lid, mut req: smp::Repr) -> Option<smp::Repr> {
        self.tid += 1;
        req.tid = Tid(self.tid);
        self.sim
            .send(self.ep, dlid, &req.to_bytes().unwrap())
            .unwrap();
        let until = self.sim.now() + 1_000_000;
        self.sim.advance(until);
        let mut answer = None;
        while let Some(m) = self.sim.recv(self.ep) {
            let r = smp::Repr::parse(&m.mad).unwrap();
            if r.tid == Tid(self.tid) {
                answer = Some(r);
            }
        }
        answer
    }

    fn dr(
        &mut self,
        method: Method,
        attr_id: u16,
        attr_mod: u32,
        path: &[u8],
        data: Option<&dyn Fn(&mut smp::Repr)>,
    ) -> Option<smp::Repr> {
        let mut req = smp::Repr::dr_get(Tid(0), attr_id, attr_mod, path).unwrap();
        req.method = method;
        if let Some(f) = data {
            f(&mut req);
        }
        self.rpc(Lid::PERMISSIVE, req)
    }
}

#[test]
fn directed_route_walks_the_path_and_fills_the_return_path() {
    let f = fabric();
    let mut b = Bench::new(&f, Guid(0x10_0001)); // host-1 port 1
    let own = b.dr(Method::Get, attr::NODE_INFO, 0, &[], None).unwrap();
    let ni: node_info::Repr = own.attribute().unwrap();
    assert_eq!((ni.node_guid, ni.local_port_num), (Guid(0x10_0000), 1));

    // host-1 -> sw-a (port 3) -> sw-b (port 1) -> host-2, as `smpquery -D 0,1,3,1` walks it.
    let r = b
        .dr(Method::Get, attr::PORT_INFO, 1, &[1, 3, 1], None)
        .unwrap();
    assert_eq!(r.method, Method::GetResp);
    assert_eq!(r.status, MadStatus::OK);
    let Route::Directed(d) = r.route else {
        panic!()
    };
    assert!(d.direction);
    assert_eq!(d.hop_pointer, 0);
    assert_eq!(&d.return_path.0[1..4], &[1, 3, 1]);
    let pi: port_info::Repr = r.attribute().unwrap();
    assert_eq!(pi.port_state, PortState::Init);
    assert_eq!(pi.local_port_num, 1);
    let ni: node_info::Repr = b
        .dr(Method::Get, attr::NODE_INFO, 0, &[1, 3, 1], None)
        .unwrap()
        .attribute()
        .unwrap();
    assert_eq!(ni.node_guid, Guid(0x10_0003)); // host-2 in ibsim's numbering

    // A path through a port with no cable, or asking a CA to forward, dies silently.
    assert!(
        b.dr(Method::Get, attr::NODE_INFO, 0, &[1, 7], None)
            .is_none()
    );
    assert!(
        b.dr(Method::Get, attr::NODE_INFO, 0, &[1, 3, 1, 1], None)
            .is_none()
    );
    assert!(b.sim.stats().dropped >= 2);
}

#[test]
fn attribute_rules_and_statuses() {
    let f = fabric();
    let mut b = Bench::new(&f, Guid(0x10_0001));
    // SwitchInfo on a CA: unsupported attribute.
    let r = b.dr(Method::Get, attr::SWITCH_INFO, 0, &[], None).unwrap();
    assert_eq!(r.status, MadStatus::METHOD_ATTR_UNSUPPORTED);
    // PortInfo of a port the switch does not have.
    let r = b.dr(Method::Get, attr::PORT_INFO, 9, &[1], None).unwrap();
    assert_eq!(r.status, MadStatus::INVALID_FIELD);
    // An LFT block beyond the capacity.
    let r = b
        .dr(Method::Get, attr::LINEAR_FORWARDING_TABLE, 768, &[1], None)
        .unwrap();
    assert_eq!(r.status, MadStatus::INVALID_FIELD);
    // Setting the state of a switch's port 0 is refused.
    let set_state = |s: PortState| {
        move |req: &mut smp::Repr| {
            let pi = port_info::Repr {
                port_state: s,
                ..port_info::Repr::default()
            };
            req.set_attribute(&pi).unwrap();
        }
    };
    let r = b
        .dr(
            Method::Set,
            attr::PORT_INFO,
            0,
            &[1],
            Some(&set_state(PortState::Armed)),
        )
        .unwrap();
    assert_eq!(r.status, MadStatus::INVALID_FIELD);
    // INIT -> ACTIVE skips ARMED: refused; INIT -> ARMED works; ACTIVE needs an armed peer.
    let r = b
        .dr(
            Method::Set,
            attr::PORT_INFO,
            1,
            &[],
            Some(&set_state(PortState::Active)),
        )
        .unwrap();
    assert_eq!(r.status, MadStatus::INVALID_FIELD);
    let r = b
        .dr(
            Method::Set,
            attr::PORT_INFO,
            1,
            &[],
            Some(&set_state(PortState::Armed)),
        )
        .unwrap();
    assert_eq!(r.status, MadStatus::OK);
    assert_eq!(
        r.attribute::<port_info::Repr>().unwrap().port_state,
        PortState::Armed
    );
    let r = b
        .dr(
            Method::Set,
            attr::PORT_INFO,
            1,
            &[],
            Some(&set_state(PortState::Active)),
        )
        .unwrap();
    assert_eq!(r.status, MadStatus::INVALID_FIELD, "peer still in INIT");
    let r = b
        .dr(
            Method::Set,
            attr::PORT_INFO,
            1,
            &[1],
            Some(&set_state(PortState::Armed)),
        )
        .unwrap();
    assert_eq!(r.status, MadStatus::OK);
    let r = b
        .dr(
            Method::Set,
            attr::PORT_INFO,
            1,
            &[],
            Some(&set_state(PortState::Active)),
        )
        .unwrap();
    assert_eq!(
        r.attribute::<port_info::Repr>().unwrap().port_state,
        PortState::Active
    );
    // Read-only fields stay: a Set cannot change MTUCap or LocalPortNum.
    let r = b
        .dr(
            Method::Set,
            attr::PORT_INFO,
            1,
            &[],
            Some(&|req: &mut smp::Repr| {
                let pi = port_info::Repr {
                    mtu_cap: port_info::Mtu::Mtu256,
                    local_port_num: 9,
                    ..port_info::Repr::default()
                };
                req.set_attribute(&pi).unwrap();
            }),
        )
        .unwrap();
    let pi: port_info::Repr = r.attribute().unwrap();
    assert_eq!(pi.mtu_cap, port_info::Mtu::Mtu4096);
    assert_eq!(pi.local_port_num, 1);
}

/// Programs LIDs and LFTs by directed route, then talks LID-routed.
#[test]
fn lid_routing_through_programmed_tables_and_traps() {
    let f = fabric();
    let sm_port = f.port_by_guid(Guid(0x10_0001)).unwrap();
    let mut b = Bench::new(&f, Guid(0x10_0001));
    // LIDs: host-1 = 1 (the SM), sw-a = 2, sw-b = 3.
    let set_lid = |lid: u16| {
        move |req: &mut smp::Repr| {
            let pi = port_info::Repr {
                lid: Lid(lid),
                master_sm_lid: Lid(1),
                ..port_info::Repr::default()
            };
            req.set_attribute(&pi).unwrap();
        }
    };
    assert_eq!(
        b.dr(Method::Set, attr::PORT_INFO, 1, &[], Some(&set_lid(1)))
            .unwrap()
            .status,
        MadStatus::OK
    );
    assert_eq!(
        b.dr(Method::Set, attr::PORT_INFO, 0, &[1], Some(&set_lid(2)))
            .unwrap()
            .status,
        MadStatus::OK
    );
    assert_eq!(
        b.dr(Method::Set, attr::PORT_INFO, 0, &[1, 3], Some(&set_lid(3)))
            .unwrap()
            .status,
        MadStatus::OK
    );
    // LFTs: sw-a: LID 1 -> port 1, 2 -> 0, 3 -> 3. sw-b: 1 -> 3, 2 -> 3, 3 -> 0.
    let program = |b: &mut Bench, path: &[u8], ports: [u8; 4]| {
        let top = move |req: &mut smp::Repr| {
            let si = switch_info::Repr {
                linear_fdb_top: Lid(3),
                ..switch_info::Repr::default()
            };
            req.set_attribute(&si).unwrap();
        };
        assert_eq!(
            b.dr(Method::Set, attr::SWITCH_INFO, 0, path, Some(&top))
                .unwrap()
                .status,
            MadStatus::OK
        );
        let block = move |req: &mut smp::Repr| {
            let mut l = lft::Repr::default();
            for (i, p) in ports.iter().enumerate() {
                l.port_block[i] = PortNum(*p);
            }
            req.set_attribute(&l).unwrap();
        };
        assert_eq!(
            b.dr(
                Method::Set,
                attr::LINEAR_FORWARDING_TABLE,
                0,
                path,
                Some(&block)
            )
            .unwrap()
            .status,
            MadStatus::OK
        );
    };
    program(&mut b, &[1], [255, 1, 0, 3]);
    program(&mut b, &[1, 3], [255, 3, 3, 0]);
    let r = b
        .rpc(
            Lid(3),
            smp::Repr::request(Method::Get, Tid(0), attr::NODE_INFO, 0, Route::Lid),
        )
        .unwrap();
    let ni: node_info::Repr = r.attribute().unwrap();
    assert_eq!(ni.node_guid, Guid(0x20_0001));
    assert_eq!(ni.local_port_num, 3, "arrived on sw-b port 3");
    // No entry for LID 4: dropped.
    assert!(
        b.rpc(
            Lid(4),
            smp::Repr::request(Method::Get, Tid(0), attr::NODE_INFO, 0, Route::Lid)
        )
        .is_none()
    );

    // Pull the sw-b - host-2 cable: sw-b traps to its SM (LID 1) until repressed.
    let sw2 = f.node_by_guid(Guid(0x20_0001)).unwrap();
    let p = f.port_of(sw2, 1).unwrap();
    b.sim.link_down(p);
    assert_eq!(b.sim.port(p).info.port_state, PortState::Down);
    let until = b.sim.now() + 1_000_000;
    b.sim.advance(until);
    let m = b.sim.recv(b.ep).expect("trap");
    assert_eq!(m.slid, Lid(3));
    let trap = smp::Repr::parse(&m.mad).unwrap();
    assert_eq!(trap.method, Method::Trap);
    let n: notice::Repr = trap.attribute().unwrap();
    assert_eq!(n, notice::Repr::trap_128(Lid(3), Lid(3)));
    assert!(b.sim.trap_pending(sw2));
    // Unrepressed, it comes again.
    let until = b.sim.now() + SimConfig::default().trap_interval_ns + 1;
    b.sim.advance(until);
    assert!(b.sim.recv(b.ep).is_some());
    let repress = notice::trap_repress(&trap).unwrap();
    b.sim
        .send(b.ep, Lid(3), &repress.to_bytes().unwrap())
        .unwrap();
    let until = b.sim.now() + 1_000_000;
    b.sim.advance(until);
    assert!(!b.sim.trap_pending(sw2));
    let _ = sm_port;
    let _: PortIdx = p;
}

/// Tables are held only once programmed, and read as a fresh switch's would before that.
#[test]
fn tables_read_as_power_up_until_programmed() {
    use sm_mad::{PKey, pkey_table, vl_arb};
    let f = fabric();
    let mut b = Bench::new(&f, Guid(0x10_0001));
    let get = |b: &mut Bench, a: u16, m: u32| b.dr(Method::Get, a, m, &[1], None).unwrap();
    // LFT: 255 everywhere, the last block inside the capacity can be set, the next not.
    let r = get(&mut b, attr::LINEAR_FORWARDING_TABLE, 700);
    assert_eq!((r.status, r.data.0), (MadStatus::OK, [255; 64]));
    let fill = |req: &mut smp::Repr| req.data.0 = [7; 64];
    let r = b
        .dr(
            Method::Set,
            attr::LINEAR_FORWARDING_TABLE,
            767,
            &[1],
            Some(&fill),
        )
        .unwrap();
    assert_eq!((r.status, r.data.0), (MadStatus::OK, [7; 64]));
    let r = b
        .dr(
            Method::Set,
            attr::LINEAR_FORWARDING_TABLE,
            768,
            &[1],
            Some(&fill),
        )
        .unwrap();
    assert_eq!(r.status, MadStatus::INVALID_FIELD);
    let r = get(&mut b, attr::LINEAR_FORWARDING_TABLE, 766);
    assert_eq!(r.data.0, [255; 64]);
    // P_Key table of switch port 2: the default key first.
    let t: pkey_table::Repr = get(&mut b, attr::P_KEY_TABLE, 2 << 16).attribute().unwrap();
    assert_eq!(t.p_key_table[0], PKey::DEFAULT);
    assert!(t.p_key_table[1..].iter().all(|k| *k == PKey(0)));
    let set_keys = |req: &mut smp::Repr| {
        let mut keys = [PKey(0); 32];
        keys[0] = PKey(0x8001);
        keys[1] = PKey(0x7fff);
        req.set_attribute(&pkey_table::Repr::from_keys(&keys))
            .unwrap();
    };
    b.dr(
        Method::Set,
        attr::P_KEY_TABLE,
        2 << 16,
        &[1],
        Some(&set_keys),
    )
    .unwrap();
    let t: pkey_table::Repr = get(&mut b, attr::P_KEY_TABLE, 2 << 16).attribute().unwrap();
    assert_eq!(&t.p_key_table[..2], &[PKey(0x8001), PKey(0x7fff)]);
    let t: pkey_table::Repr = get(&mut b, attr::P_KEY_TABLE, 3 << 16).attribute().unwrap();
    assert_eq!(t.p_key_table[0], PKey::DEFAULT, "other ports untouched");
    // VL arbitration: zeros, then what was set.
    let low = 1 << 16 | 2;
    let t: vl_arb::Repr = get(&mut b, attr::VL_ARBITRATION_TABLE, low)
        .attribute()
        .unwrap();
    assert!(
        t.vl_arbitration_table
            .iter()
            .all(|e| *e == vl_arb::Entry::new(0, 0))
    );
    let set_arb = |req: &mut smp::Repr| {
        let mut t = vl_arb::Repr {
            vl_arbitration_table: [vl_arb::Entry::new(0, 0); 32],
        };
        t.vl_arbitration_table[0] = vl_arb::Entry::new(1, 64);
        req.set_attribute(&t).unwrap();
    };
    b.dr(
        Method::Set,
        attr::VL_ARBITRATION_TABLE,
        low,
        &[1],
        Some(&set_arb),
    )
    .unwrap();
    let t: vl_arb::Repr = get(&mut b, attr::VL_ARBITRATION_TABLE, low)
        .attribute()
        .unwrap();
    assert_eq!(t.vl_arbitration_table[0], vl_arb::Entry::new(1, 64));
}

#[test]
fn a_stubborn_agent_answers_a_set_and_keeps_speed_and_lease() {
    let f = fabric();
    let mut b = Bench::new(&f, Guid(0x10_0001));
    let sw_a = f
        .port(f.port_by_guid(Guid(0x10_0001)).unwrap())
        .remote
        .unwrap();
    let sw_a = f.port(sw_a).node;
    let set = |req: &mut smp::Repr| {
        let pi = port_info::Repr {
            lid: Lid(2),
            m_key_lease_period: 60,
            link_speed_enabled: 1,
            ..port_info::Repr::default()
        };
        req.set_attribute(&pi).unwrap();
    };
    b.sim.set_stubborn(sw_a, true);
    let r = b
        .dr(Method::Set, attr::PORT_INFO, 0, &[1], Some(&set))
        .unwrap();
    assert_eq!(r.status, MadStatus::OK);
    let pi: port_info::Repr = r.attribute().unwrap();
    assert_eq!(
        (pi.lid, pi.m_key_lease_period, pi.link_speed_enabled),
        (Lid(2), 0, 7)
    );
    b.sim.set_stubborn(sw_a, false);
    let r = b
        .dr(Method::Set, attr::PORT_INFO, 0, &[1], Some(&set))
        .unwrap();
    let pi: port_info::Repr = r.attribute().unwrap();
    assert_eq!(
        (pi.lid, pi.m_key_lease_period, pi.link_speed_enabled),
        (Lid(2), 60, 1)
    );
}
