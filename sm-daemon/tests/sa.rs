//! The SA server against the simulated fabric, in virtual time: the SM brings a fabric up,
//! a second endpoint on another CA port acts as the SA client (sending requests, acking RMPP
//! segments with the sm-mad `RmppReceiver`), and every answer is checked against the fabric.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use sm_core::fabric::{Fabric, NodeKind, PortIdx};
use sm_core::lid::LidStore;
use sm_core::read_topology_str;
use sm_daemon::core::{Event, Params};
use sm_daemon::transport::sim::SimDriver;
use sm_mad::rmpp::{self, ReceiverState, RmppReceiver};
use sm_mad::{Lid, MadStatus, Method, Tid, Wire, node_record, sa};
use sm_sim::{EndpointId, SimConfig};

/// ibsim's `net.2sw2path4hca` (two switches joined by two links, four HCAs).
const NET_2SW2PATH4HCA: &str = r#"
Switch	8 "Switch1"
[1]	"Hca1"[1]
[2]	"Hca3"[1]
[3]	"Switch2"[3]
[5]	"Switch2"[5]

Switch 8 "Switch2"
[1]	"Hca2"[1]
[2]	"Hca4"[1]
[3]	"Switch1"[3]
[5]	"Switch1"[5]

Hca	2 "Hca1"
[1]	"Switch1"[1]

Hca	2 "Hca2"
[1]	"Switch2"[1]

Hca	2 "Hca3"
[1]	"Switch1"[2]

Hca 	2 "Hca4"
[1]	"Switch2"[2]
"#;

fn small() -> Fabric {
    read_topology_str(NET_2SW2PATH4HCA, Path::new("net.2sw2path4hca"))
        .unwrap()
        .fabric
}

/// Linked CA ports, in port order.
fn ca_ports(f: &Fabric) -> Vec<PortIdx> {
    f.cas()
        .flat_map(|n| f.node_ports(n))
        .filter(|&p| f.port(p).remote.is_some())
        .collect()
}

/// An answer as the client reassembled it.
#[derive(Debug)]
struct Answer {
    /// The first (or only) MAD's header and data.
    head: sa::Repr,
    /// Table answers: the reassembled records; Get answers: the data.
    payload: Vec<u8>,
    /// MADs the client received for it.
    mads: usize,
}

impl Answer {
    fn status(&self) -> MadStatus {
        self.head.status
    }
    fn records<R: Wire>(&self) -> Vec<R> {
        if self.head.method == Method::GetResp {
            return vec![R::parse(&self.payload).unwrap()];
        }
        sa::records::<R>(&self.payload, self.head.attribute_offset)
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }
}

/// The SM on the first CA port, a client on the last one.
struct Fixture {
    d: SimDriver,
    fabric: Fabric,
    client: EndpointId,
    client_port: PortIdx,
    sm_lid: Lid,
    next_tid: u64,
}

impl Fixture {
    fn up(fabric: Fabric, params: Params, cfg: SimConfig) -> Fixture {
        let cas = ca_ports(&fabric);
        let (sm_port, client_port) = (cas[0], *cas.last().unwrap());
        let mut d = SimDriver::new(&fabric, sm_port, params, LidStore::new(), cfg);
        let client = d.sim.attach(client_port);
        d.start();
        d.run_until(
            60_000_000_000,
            |e| matches!(e, Event::SweepDone(r) if r.subnet_up),
        )
        .expect("subnet up");
        let fabric = d.sm.fabric().unwrap().clone();
        let sm_lid = d.sm.own_lid();
        Fixture {
            d,
            fabric,
            client,
            client_port,
            sm_lid,
            next_tid: 0x5a00_0000,
        }
    }

    fn small() -> Fixture {
        Fixture::up(small(), Params::default(), SimConfig::default())
    }

    fn client_lid(&self) -> Lid {
        self.d.sim.port(self.client_port).info.lid
    }

    fn send(&mut self, mad: &[u8]) {
        self.d.sim.send(self.client, self.sm_lid, mad).unwrap();
    }

    /// Sends `req` (TID assigned) and runs until its answer is complete.
    fn ask(&mut self, mut req: sa::Repr) -> Answer {
        self.next_tid += 1;
        req.tid = Tid(self.next_tid);
        self.ask_raw(&req.to_bytes().unwrap()).expect("an answer")
    }

    /// Sends raw bytes and runs until an answer with the same TID is complete (acking RMPP
    /// segments), or nothing is left to happen.
    fn ask_raw(&mut self, bytes: &[u8]) -> Option<Answer> {
        let tid = u64::from_be_bytes(bytes[8..16].try_into().unwrap());
        let mut b = bytes.to_vec();
        b.resize(256, 0);
        self.send(&b);
        let mut rx: Option<RmppReceiver> = None;
        let mut mads = 0;
        let deadline = self.d.now() + 60_000_000_000;
        loop {
            while let Some(m) = self.d.sim.recv(self.client) {
                if u64::from_be_bytes(m.mad[8..16].try_into().unwrap()) != tid {
                    continue;
                }
                mads += 1;
                let r = rmpp::Repr::parse_mad(&m.mad).unwrap();
                if !r.is_active() {
                    return Some(Answer {
                        head: sa::Repr::parse(&m.mad).unwrap(),
                        payload: m.mad[56..].to_vec(),
                        mads,
                    });
                }
                let rx = rx.get_or_insert_with(RmppReceiver::sa);
                rx.handle_mad(&m.mad).unwrap();
                while let Some(ack) = rx.poll_transmit() {
                    self.send(&ack);
                }
                if *rx.state() == ReceiverState::Complete {
                    let head = sa::Repr::parse(&m.mad).unwrap();
                    let head = sa::Repr {
                        rmpp: rmpp::Repr::parse_mad(rx.header().unwrap()).unwrap(),
                        ..head
                    };
                    let payload = rx.take_payload().unwrap();
                    // Let the final ACK reach the SA.
                    self.settle();
                    return Some(Answer {
                        head,
                        payload,
                        mads,
                    });
                }
            }
            if self.d.now() > deadline || !self.d.step() {
                return None;
            }
        }
    }

    /// Runs until nothing is due for a while (virtual time).
    fn settle(&mut self) {
        let until = self.d.now() + 1_000_000;
        while self.d.next_deadline().is_some_and(|t| t <= until) {
            if !self.d.step() {
                break;
            }
        }
    }
}

fn get(attr: u16, mask: u64, rec: &impl Wire) -> sa::Repr {
    let mut r = sa::Repr::request(Method::Get, Tid(0), attr, mask);
    rec.emit(&mut r.data.0).unwrap();
    r
}

fn table(attr: u16, mask: u64, rec: &impl Wire) -> sa::Repr {
    sa::Repr {
        method: Method::GetTable,
        ..get(attr, mask, rec)
    }
}

#[test]
fn node_record_by_lid() {
    let mut fx = Fixture::small();
    let f = fx.fabric.clone();
    for p in f.end_ports() {
        let port = f.port(p);
        let node = f.node(port.node);
        if node.kind != NodeKind::Switch && port.remote.is_none() {
            continue;
        }
        let q = node_record::Repr {
            lid: port.lid,
            ..Default::default()
        };
        let a = fx.ask(get(node_record::ATTR_ID, node_record::comp::LID, &q));
        assert_eq!(a.status(), MadStatus::OK, "LID {}", port.lid);
        assert_eq!(a.head.method, Method::GetResp);
        let r: node_record::Repr = a.records()[0];
        assert_eq!(r.lid, port.lid);
        assert_eq!(r.node_info.node_guid, node.guid);
        assert_eq!(r.node_info.port_guid, port.guid);
        assert_eq!(r.node_info.local_port_num, port.num);
        assert_eq!(
            r.node_info.node_type,
            if node.kind == NodeKind::Switch {
                sm_mad::node_info::NodeType::Switch
            } else {
                sm_mad::node_info::NodeType::Ca
            }
        );
        assert_eq!(r.node_description.as_string(), node.description);
    }
    let all = fx.ask(table(
        node_record::ATTR_ID,
        0,
        &node_record::Repr::default(),
    ));
    assert_eq!(all.status(), MadStatus::OK);
    let recs: Vec<node_record::Repr> = all.records();
    // 2 switches + 4 HCAs with one linked port each.
    assert_eq!(recs.len(), 6);
    assert!(all.mads >= 4, "{} MADs: a multi-segment answer", all.mads);
}

#[test]
fn debug_dump() {
    let fx = Fixture::small();
    let f = &fx.fabric;
    for p in f.end_ports() {
        let port = f.port(p);
        eprintln!(
            "{:?} {} num {} lid {} node {}",
            p,
            port.guid,
            port.num,
            port.lid,
            f.node(port.node).description
        );
    }
    eprintln!("client lid {}", fx.client_lid());
    eprintln!("{:#?}", fx.d.sm.sa().stats());
}
