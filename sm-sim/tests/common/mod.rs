//! An SM stand-in for the integration tests: directed-route and LID-routed requests from
//! an endpoint on host-1 of the workspace's `testdata/2sw-2path-4ca.net`, and a bring-up
//! that gives every port a LID and every switch a forwarding table, so that traps reach the
//! SM.
//!
//! ```text
//! host-1[1] -- [1]sw-a[3] ==== [3]sw-b[1] -- [1]host-2
//! host-3[1] -- [2]    [5] ==== [5]    [2] -- [1]host-4
//! ```
//! LIDs after [`Sm::bring_up`]: host-1 1 (the SM), sw-a 2, sw-b 3, host-2 4, host-3 5,
//! host-4 6.

#![allow(dead_code, unreachable_pub)]

use std::path::Path;

use sm_core::fabric::{Fabric, NodeIdx, PortIdx};
use sm_core::read_topology_str;
use sm_mad::port_info::{self, PhysPortState, PortState};
use sm_mad::smp::{self, Route};
use sm_mad::{Guid, Lid, MadStatus, Method, PortNum, Tid, attr, lft, switch_info};
use sm_sim::{EndpointId, Inbound, Nanos, Sim, SimConfig};

pub const SW1: &[u8] = &[1];
pub const SW2: &[u8] = &[1, 3];
pub const HCA2: &[u8] = &[1, 3, 1];
pub const HCA3: &[u8] = &[1, 2];
pub const HCA4: &[u8] = &[1, 3, 2];

/// The fabric file, compiled in so the tests need nothing outside the source tree.
pub const NET: &str = include_str!("../../../testdata/2sw-2path-4ca.net");

pub fn fabric() -> Fabric {
    read_topology_str(NET, Path::new("2sw-2path-4ca.net"))
        .unwrap()
        .fabric
}

/// The node with this description.
pub fn node(f: &Fabric, desc: &str) -> NodeIdx {
    let i = f
        .nodes()
        .iter()
        .position(|n| n.description == desc)
        .unwrap();
    NodeIdx(i as u32)
}

/// Port `num` of the node with this description.
pub fn port(f: &Fabric, desc: &str, num: u8) -> PortIdx {
    f.port_of(node(f, desc), num).unwrap()
}

pub struct Sm {
    pub sim: Sim,
    pub ep: EndpointId,
    pub tid: u64,
    /// M_Key put into every request.
    pub m_key: u64,
    /// MADs received while waiting for answers that were not the answer.
    pub other: Vec<Inbound>,
}

impl Sm {
    pub fn new(f: &Fabric, cfg: SimConfig) -> Sm {
        let mut sim = Sim::new(f, cfg);
        let ep = sim.attach(f.port_by_guid(Guid(0x10_0001)).unwrap());
        Sm {
            sim,
            ep,
            tid: 0,
            m_key: 0,
            other: Vec::new(),
        }
    }

    /// Runs the fabric for `dt` virtual nanoseconds.
    pub fn run(&mut self, dt: Nanos) {
        let t = self.sim.now() + dt;
        self.sim.advance(t);
    }

    /// Sends a request and returns its TID.
    pub fn send(&mut self, dlid: Lid, mut req: smp::Repr) -> Tid {
        self.tid += 1;
        req.tid = Tid(self.tid);
        req.m_key = self.m_key;
        self.sim
            .send(self.ep, dlid, &req.to_bytes().unwrap())
            .unwrap();
        req.tid
    }

    /// Everything received so far (including what earlier calls set aside).
    pub fn drain(&mut self) -> Vec<Inbound> {
        let mut v = std::mem::take(&mut self.other);
        while let Some(m) = self.sim.recv(self.ep) {
            v.push(m);
        }
        v
    }

    /// Sends a request, runs 1 ms and returns the answer to it, if any.
    pub fn rpc(&mut self, dlid: Lid, req: smp::Repr) -> Option<smp::Repr> {
        let tid = self.send(dlid, req);
        self.run(1_000_000);
        let mut answer = None;
        while let Some(m) = self.sim.recv(self.ep) {
            let r = smp::Repr::parse(&m.mad).unwrap();
            if r.tid == tid && r.method == Method::GetResp {
                answer = Some(r);
            } else {
                self.other.push(m);
            }
        }
        answer
    }

    pub fn dr(
        &mut self,
        method: Method,
        attr_id: u16,
        attr_mod: u32,
        path: &[u8],
        data: Option<[u8; 64]>,
    ) -> Option<smp::Repr> {
        let mut req = smp::Repr::dr_get(Tid(0), attr_id, attr_mod, path).unwrap();
        req.method = method;
        if let Some(d) = data {
            req.data.0 = d;
        }
        self.rpc(Lid::PERMISSIVE, req)
    }

    pub fn get_pi(&mut self, path: &[u8], num: u8) -> Option<port_info::Repr> {
        self.dr(Method::Get, attr::PORT_INFO, num as u32, path, None)
            .map(|r| r.attribute().unwrap())
    }

    /// Read-modify-write of PortInfo (no state change unless `edit` asks for one).
    pub fn set_pi(
        &mut self,
        path: &[u8],
        num: u8,
        edit: impl FnOnce(&mut port_info::Repr),
    ) -> Option<smp::Repr> {
        let mut pi = self.get_pi(path, num)?;
        pi.port_state = PortState::NoChange;
        pi.port_physical_state = PhysPortState::NoChange;
        edit(&mut pi);
        let mut d = [0u8; 64];
        sm_mad::Wire::emit(&pi, &mut d).unwrap();
        self.dr(Method::Set, attr::PORT_INFO, num as u32, path, Some(d))
    }

    pub fn set_lid(&mut self, path: &[u8], num: u8, lid: u16) {
        let r = self
            .set_pi(path, num, |pi| {
                pi.lid = Lid(lid);
                pi.master_sm_lid = Lid(1);
            })
            .unwrap();
        assert_eq!(r.status, MadStatus::OK);
    }

    /// SwitchInfo: LinearFDBTop 6 and PortStateChange cleared.
    pub fn switch_info_set(&mut self, path: &[u8]) -> switch_info::Repr {
        let si = switch_info::Repr {
            linear_fdb_top: Lid(6),
            port_state_change: true,
            ..switch_info::Repr::default()
        };
        let mut d = [0u8; 64];
        sm_mad::Wire::emit(&si, &mut d).unwrap();
        let r = self
            .dr(Method::Set, attr::SWITCH_INFO, 0, path, Some(d))
            .unwrap();
        assert_eq!(r.status, MadStatus::OK);
        r.attribute().unwrap()
    }

    pub fn switch_info(&mut self, path: &[u8]) -> Option<switch_info::Repr> {
        self.dr(Method::Get, attr::SWITCH_INFO, 0, path, None)
            .map(|r| r.attribute().unwrap())
    }

    pub fn lft_block0(&mut self, path: &[u8]) -> Option<[u8; 64]> {
        self.dr(Method::Get, attr::LINEAR_FORWARDING_TABLE, 0, path, None)
            .map(|r| r.data.0)
    }

    /// LIDs, SM LID and forwarding tables everywhere; PortStateChange cleared.
    pub fn bring_up(&mut self) {
        self.set_lid(&[], 1, 1);
        self.set_lid(SW1, 0, 2);
        self.set_lid(SW2, 0, 3);
        self.set_lid(HCA2, 0, 4);
        self.set_lid(HCA3, 0, 5);
        self.set_lid(HCA4, 0, 6);
        for (path, ports) in [
            (SW1, [255u8, 1, 0, 3, 3, 2, 3]),
            (SW2, [255u8, 3, 3, 0, 1, 3, 2]),
        ] {
            self.switch_info_set(path);
            let mut l = lft::Repr::default();
            for (i, p) in ports.iter().enumerate() {
                l.port_block[i] = PortNum(*p);
            }
            let mut d = [0u8; 64];
            sm_mad::Wire::emit(&l, &mut d).unwrap();
            let r = self
                .dr(Method::Set, attr::LINEAR_FORWARDING_TABLE, 0, path, Some(d))
                .unwrap();
            assert_eq!(r.status, MadStatus::OK);
        }
        self.other.clear();
    }

    /// A LID-routed Get(NodeInfo) to `lid` is answered.
    pub fn lid_reachable(&mut self, lid: u16) -> bool {
        self.rpc(
            Lid(lid),
            smp::Repr::request(Method::Get, Tid(0), attr::NODE_INFO, 0, Route::Lid),
        )
        .is_some()
    }

    /// The traps received so far (and set aside), as SMPs.
    pub fn traps(&mut self) -> Vec<(Inbound, smp::Repr)> {
        self.drain()
            .into_iter()
            .filter_map(|m| {
                let r = smp::Repr::parse(&m.mad).ok()?;
                (r.method == Method::Trap).then_some((m, r))
            })
            .collect()
    }
}
