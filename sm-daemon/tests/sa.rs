//! The SA server against the simulated fabric, in virtual time: the SM brings a fabric up,
//! a second endpoint on another CA port acts as the SA client (sending requests, acking RMPP
//! segments with the sm-mad `RmppReceiver`), and every answer is checked against the fabric.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::HashMap;
use std::path::Path;

use sm_core::fabric::{Fabric, NodeKind, PortIdx};
use sm_core::fabric::{NodeIdx, Speed};
use sm_core::lid::LidStore;
use sm_core::partitions::Partitions;
use sm_core::qos::QosOptions;
use sm_core::read_topology_str;
use sm_daemon::core::{Event, Instant, Params};
use sm_daemon::transport::sim::SimDriver;
use sm_mad::link::{Mtu, Rate};
use sm_mad::path_record::{self, Selector};
use sm_mad::port_info::{link_speed_ext, link_width};
use sm_mad::rmpp::{self, ReceiverState, RmppReceiver, RmppSender, Segmenter, SenderConfig};
use sm_mad::{
    Gid, Guid, Lid, MadStatus, Method, PKey, Sl, Tid, Wire, class_port_info, guid_info_record,
    lft_record, link_record, mft_record, multipath_record, node_info, node_record,
    pkey_table_record, port_info, port_info_record, sa, sl2vl_record, sm_info_record,
    switch_info_record, vl_arb_record,
};
use sm_sim::{EndpointId, SimConfig};

/// ibsim's `net.2sw2path4hca` (two switches joined by two links, four HCAs).
const NET_2SW2PATH4HCA: &str = include_str!("data/2sw2path4hca.net");

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
    /// The SM's model of the fabric (GUID order: its indices are not the simulator's).
    fabric: Fabric,
    /// The fabric the simulator was built from.
    orig: Fabric,
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
        let orig = fabric;
        let fabric = d.sm.fabric().unwrap().clone();
        let sm_lid = d.sm.own_lid();
        Fixture {
            d,
            fabric,
            orig,
            client,
            client_port,
            sm_lid,
            next_tid: 0x5a00_0000,
        }
    }

    fn small() -> Fixture {
        Fixture::up(small(), Params::default(), SimConfig::default())
    }

    /// The simulator's slot of a port of the SM's model.
    fn sim_port(&self, p: PortIdx) -> PortIdx {
        let port = self.fabric.port(p);
        let n = self
            .orig
            .node_by_guid(self.fabric.node(port.node).guid)
            .unwrap();
        self.orig.port_of(n, port.num).unwrap()
    }

    /// The simulator's index of a node of the SM's model.
    fn sim_node(&self, n: NodeIdx) -> NodeIdx {
        self.orig.node_by_guid(self.fabric.node(n).guid).unwrap()
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
    /// segments; resending the request when nothing comes back, as a client does), or
    /// nothing is left to happen. After a table answer it keeps acknowledging the sender's
    /// retransmissions until the SA has no transfer left.
    fn ask_raw(&mut self, bytes: &[u8]) -> Option<Answer> {
        let tid = u64::from_be_bytes(bytes[8..16].try_into().unwrap());
        let mut b = bytes.to_vec();
        b.resize(256, 0);
        self.send(&b);
        let mut rx: Option<RmppReceiver> = None;
        let mut done: Option<Answer> = None;
        let mut mads = 0;
        let start = self.d.now();
        let mut heard = start;
        let mut resends = 0;
        loop {
            while let Some(m) = self.d.sim.recv(self.client) {
                if u64::from_be_bytes(m.mad[8..16].try_into().unwrap()) != tid {
                    continue;
                }
                mads += 1;
                heard = self.d.now();
                let r = rmpp::Repr::parse_mad(&m.mad).unwrap();
                if !r.is_active() {
                    return Some(Answer {
                        head: sa::Repr::parse(&m.mad).unwrap(),
                        payload: m.mad[56..].to_vec(),
                        mads,
                    });
                }
                let rx = rx.get_or_insert_with(RmppReceiver::sa);
                let _ = rx.handle_mad(&m.mad);
                while let Some(ack) = rx.poll_transmit() {
                    self.send(&ack);
                }
                if done.is_none() && *rx.state() == ReceiverState::Complete {
                    let head = sa::Repr::parse(&m.mad).unwrap();
                    let head = sa::Repr {
                        rmpp: rmpp::Repr::parse_mad(rx.header().unwrap()).unwrap(),
                        ..head
                    };
                    done = Some(Answer {
                        head,
                        payload: rx.payload().unwrap().to_vec(),
                        mads,
                    });
                }
            }
            if done.is_some() && self.d.sm.sa().transfers() == 0 {
                return done.map(|a| Answer { mads, ..a });
            }
            if self.d.now() > start + 120_000_000_000 {
                return done;
            }
            if rx.is_none() && self.d.now() > heard + 1_000_000_000 {
                // No answer yet: the request (or the answer) was lost; ask again.
                heard = self.d.now();
                resends += 1;
                self.send(&b);
            }
            let stalled = rx.as_ref().is_some_and(|r| {
                matches!(r.state(), ReceiverState::Failed(_))
                    || (done.is_none() && self.d.now() > heard + 5_000_000_000)
            });
            if stalled {
                // The sender gave up on the transfer (its ABORT may be lost too): a client
                // asks again, as a real one does after its own timeout.
                rx = None;
                heard = self.d.now();
                resends += 1;
                self.send(&b);
            }
            let idle = self
                .d
                .next_deadline()
                .is_none_or(|t| t > self.d.now() + 100_000_000);
            // Silence: the SA does not answer this at all (a few tries, so a lost request
            // under fault injection is not mistaken for silence).
            if idle && rx.is_none() && resends >= 3 {
                return None;
            }
            if !self.d.step() {
                return done;
            }
        }
    }

    /// Runs until nothing is due for a while (virtual time).
    /// Runs until nothing is due within 1 ms of virtual time (joins and leaves are
    /// programmed a millisecond after they arrive, then their Sets travel).
    fn settle(&mut self) {
        while self
            .d
            .next_deadline()
            .is_some_and(|t| t <= self.d.now() + 1_000_000)
        {
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

/// The node with this description.
fn node(f: &Fabric, desc: &str) -> NodeIdx {
    NodeIdx(
        f.nodes()
            .iter()
            .position(|n| n.description == desc)
            .unwrap() as u32,
    )
}

/// The LID of a node: its switch port 0, or its first linked port.
fn lid_of(f: &Fabric, n: NodeIdx) -> Lid {
    let p = f
        .port_of(n, 0)
        .or_else(|| f.node_ports(n).find(|&p| f.port(p).remote.is_some()))
        .unwrap();
    f.port(p).lid
}

fn pr_query(slid: Lid, dlid: Lid) -> path_record::Repr {
    path_record::Repr {
        slid,
        dlid,
        ..Default::default()
    }
}

const PR_LIDS: u64 = path_record::comp::SLID | path_record::comp::DLID;

#[test]
fn port_info_records_live_and_m_key_only_when_trusted() {
    let params = Params {
        m_key: 0x1234_5678_9abc_def0,
        ..Params::default()
    };
    let mut fx = Fixture::up(small(), params, SimConfig::default());
    let f = fx.fabric.clone();
    let sw = node(&f, "Switch1");
    let sw_lid = lid_of(&f, sw);
    // Every port of the switch, 0..=8, with the switch's LID as EndportLID.
    let q = port_info_record::Repr {
        endport_lid: sw_lid,
        ..Default::default()
    };
    let a = fx.ask(table(
        port_info_record::ATTR_ID,
        port_info_record::comp::ENDPORT_LID,
        &q,
    ));
    let recs: Vec<port_info_record::Repr> = a.records();
    assert_eq!(recs.len(), 9);
    for (i, r) in recs.iter().enumerate() {
        assert_eq!((r.endport_lid, r.port_num), (sw_lid, i as u8));
        assert_eq!(r.port_info.m_key, 0, "untrusted: no M_Key");
        let fp = fx.sim_port(f.port_of(sw, i as u8).unwrap());
        let sim = fx.d.sim.port(fp).info;
        // What the SA says is what the port holds.
        assert_eq!(r.port_info.port_state, sim.port_state, "port {i}");
        assert_eq!(r.port_info.neighbor_mtu, sim.neighbor_mtu, "port {i}");
        assert_eq!(r.port_info.operational_vls, sim.operational_vls, "port {i}");
        assert_eq!(r.port_info.link_width_active, sim.link_width_active);
    }
    assert_eq!(recs[0].port_info.lid, sw_lid);
    assert_eq!(recs[1].port_info.port_state, port_info::PortState::Active);
    // One port by LID and number; trusted, the M_Key shows.
    let q = port_info_record::Repr {
        endport_lid: sw_lid,
        port_num: 0,
        ..Default::default()
    };
    let mut req = get(
        port_info_record::ATTR_ID,
        port_info_record::comp::ENDPORT_LID | port_info_record::comp::PORT_NUM,
        &q,
    );
    req.sm_key = 1;
    let a = fx.ask(req);
    let r: port_info_record::Repr = a.records()[0];
    assert_eq!(r.port_num, 0);
    assert_eq!(r.port_info.m_key, 0x1234_5678_9abc_def0);
    // Enhanced compare (attribute modifier bit 31): ports whose capability mask has these
    // bits (here: the CM bit, which only the simulator's HCA ports have).
    let q = port_info_record::Repr {
        port_info: port_info::Repr {
            capability_mask: port_info::cap::IS_COMMUNICATION_MANAGEMENT_SUPPORTED
                | port_info::cap::IS_TRAP_SUPPORTED,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut req = table(
        port_info_record::ATTR_ID,
        port_info_record::comp::CAPABILITY_MASK,
        &q,
    );
    req.attr_mod = 1 << 31;
    let recs: Vec<port_info_record::Repr> = fx.ask(req).records();
    assert_eq!(recs.len(), 4, "the four linked HCA ports: {recs:?}");
    assert!(recs.iter().any(|r| r.endport_lid == fx.sm_lid));
    // Without the enhanced bit, an exact compare matches nothing.
    let req = table(
        port_info_record::ATTR_ID,
        port_info_record::comp::CAPABILITY_MASK,
        &q,
    );
    assert!(fx.ask(req).records::<port_info_record::Repr>().is_empty());
}

#[test]
fn link_switch_lft_sminfo_guidinfo_records() {
    let mut fx = Fixture::small();
    let f = fx.fabric.clone();
    // LinkRecord: every cabled port, both directions.
    let a = fx.ask(table(
        link_record::ATTR_ID,
        0,
        &link_record::Repr::default(),
    ));
    let links: Vec<link_record::Repr> = a.records();
    assert_eq!(links.len(), 2 * f.links().count());
    for (x, y) in f.links() {
        for (a, b) in [(x, y), (y, x)] {
            let want = link_record::Repr {
                from_lid: lid_of(&f, f.port(a).node),
                from_port: f.port(a).num,
                to_port: f.port(b).num,
                to_lid: lid_of(&f, f.port(b).node),
            };
            assert!(links.contains(&want), "{want:?}");
        }
    }
    // From one LID.
    let sw = node(&f, "Switch2");
    let q = link_record::Repr {
        from_lid: lid_of(&f, sw),
        ..Default::default()
    };
    let from: Vec<link_record::Repr> = fx
        .ask(table(link_record::ATTR_ID, link_record::comp::FROM_LID, &q))
        .records();
    assert_eq!(from.len(), 4);
    assert!(from.iter().all(|l| l.from_lid == lid_of(&f, sw)));

    // SwitchInfoRecord per switch: the SwitchInfo the SM set.
    for s in f.switches() {
        let lid = lid_of(&f, s);
        let q = switch_info_record::Repr {
            lid,
            ..Default::default()
        };
        let r: switch_info_record::Repr = fx
            .ask(get(
                switch_info_record::ATTR_ID,
                switch_info_record::comp::LID,
                &q,
            ))
            .records()[0];
        assert_eq!(r.lid, lid);
        let sim =
            fx.d.sim
                .node(fx.sim_node(s))
                .switch
                .as_deref()
                .unwrap()
                .info;
        assert_eq!(r.switch_info.linear_fdb_top, sim.linear_fdb_top);
        assert_eq!(r.switch_info.linear_fdb_cap, sim.linear_fdb_cap);
    }
    let all: Vec<switch_info_record::Repr> = fx
        .ask(table(
            switch_info_record::ATTR_ID,
            0,
            &switch_info_record::Repr::default(),
        ))
        .records();
    assert_eq!(all.len(), 2);

    // LinearForwardingTableRecord: block 0 of each switch is its table.
    let lfts = fx.d.sm.lfts().unwrap().clone();
    for s in &lfts.switches {
        let n = f.node_by_guid(s.guid).unwrap();
        let q = lft_record::Repr {
            lid: lid_of(&f, n),
            ..Default::default()
        };
        let recs: Vec<lft_record::Repr> = fx
            .ask(table(lft_record::ATTR_ID, lft_record::comp::LID, &q))
            .records();
        assert_eq!(recs.len(), s.ports.len().div_ceil(64));
        for (lid, &port) in s.ports.iter().enumerate() {
            assert_eq!(recs[0].port(Lid(lid as u16)).unwrap().0, port, "LID {lid}");
        }
    }

    // MulticastForwardingTableRecord: no group yet, an empty table (offset 0).
    let a = fx.ask(table(mft_record::ATTR_ID, 0, &mft_record::Repr::default()));
    assert_eq!(a.status(), MadStatus::OK);
    assert_eq!(a.head.attribute_offset, 0);
    assert!(a.payload.is_empty());

    // SMInfoRecord: our own SM, master.
    let r: sm_info_record::Repr = fx
        .ask(get(
            sm_info_record::ATTR_ID,
            0,
            &sm_info_record::Repr::default(),
        ))
        .records()[0];
    assert_eq!(r.lid, fx.sm_lid);
    assert_eq!(r.sm_info.sm_state, sm_mad::sm_info::SmState::Master);
    assert_eq!(r.sm_info.sm_key, 0);
    let sm_port = ca_ports(&f)[0];
    assert_eq!(r.sm_info.guid, f.port(sm_port).guid);
    assert!(r.sm_info.act_count > 0);

    // GUIDInfoRecord: block 0 of an end port holds its port GUID.
    let hca = node(&f, "Hca2");
    let q = guid_info_record::Repr {
        lid: lid_of(&f, hca),
        ..Default::default()
    };
    let recs: Vec<guid_info_record::Repr> = fx
        .ask(table(
            guid_info_record::ATTR_ID,
            guid_info_record::comp::LID,
            &q,
        ))
        .records();
    assert!(!recs.is_empty());
    assert_eq!(
        recs[0].guid(0),
        Some(f.port(f.port_of(hca, 1).unwrap()).guid)
    );

    // ClassPortInfo.
    let a = fx.ask(sa::Repr::request(
        Method::Get,
        Tid(0),
        sm_mad::attr::CLASS_PORT_INFO,
        0,
    ));
    let cpi = class_port_info::Repr::parse(&a.payload).unwrap();
    assert_eq!((cpi.base_version, cpi.class_version), (1, 2));
    assert_eq!(cpi.resp_time_value, 16);
    assert!(
        cpi.capability_mask & (1 << 13) != 0,
        "IsPortInfoCapMaskMatchSupported"
    );
    assert_eq!(cpi.redirect_q_key, 0x8001_0000);
}

#[test]
fn pkey_table_records_need_the_sm_key() {
    let mut fx = Fixture::small();
    let f = fx.fabric.clone();
    let hca = node(&f, "Hca3");
    let q = pkey_table_record::Repr {
        lid: lid_of(&f, hca),
        ..Default::default()
    };
    let req = table(pkey_table_record::ATTR_ID, pkey_table_record::comp::LID, &q);
    // Untrusted: ERR_REQ_INVALID, as OpenSM answers (sm-mad vector
    // sa_pkeytablerecord_untrusted): GetTableResp, AttributeOffset 0, the request echoed.
    let a = fx.ask(req);
    assert_eq!(a.status(), sa::ERR_REQ_INVALID);
    assert_eq!(a.head.method, Method::GetTableResp);
    assert_eq!(a.head.attribute_offset, 0);
    assert_eq!(a.payload[..2], lid_of(&f, hca).0.to_be_bytes());
    let mut req = table(pkey_table_record::ATTR_ID, pkey_table_record::comp::LID, &q);
    req.sm_key = 1;
    let recs: Vec<pkey_table_record::Repr> = fx.ask(req).records();
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0].port_num, 1);
    assert_eq!(recs[0].p_key(0), Some(PKey(0xffff)));
    // A wrong SM_Key is discarded, as the specification requires: no answer at all.
    let mut req = table(pkey_table_record::ATTR_ID, pkey_table_record::comp::LID, &q);
    req.sm_key = 0xdead;
    req.tid = Tid(77);
    assert!(fx.ask_raw(&req.to_bytes().unwrap()).is_none());
}

#[test]
fn qos_tables_are_what_the_sm_programmed() {
    let params = Params {
        qos: QosOptions {
            enabled: true,
            ..QosOptions::default()
        },
        ..Params::default()
    };
    let mut fx = Fixture::up(small(), params, SimConfig::default());
    let f = fx.fabric.clone();
    let sw = node(&f, "Switch1");
    let q = sl2vl_record::Repr {
        lid: lid_of(&f, sw),
        input_port_num: 1,
        output_port_num: 3,
        ..Default::default()
    };
    use sl2vl_record::comp as c;
    let r: sl2vl_record::Repr = fx
        .ask(get(
            sl2vl_record::ATTR_ID,
            c::LID | c::INPUT_PORT_NUM | c::OUTPUT_PORT_NUM,
            &q,
        ))
        .records()[0];
    // The SM programmed a spread of SLs over the data VLs; not all on VL0.
    assert!(r.sl_to_vl_mapping_table.sl_to_vl.iter().any(|v| v.0 != 0));
    // Every (out, in) pair of the switch: 9 x 9.
    let q = sl2vl_record::Repr {
        lid: lid_of(&f, sw),
        ..Default::default()
    };
    let all: Vec<sl2vl_record::Repr> = fx.ask(table(sl2vl_record::ATTR_ID, c::LID, &q)).records();
    assert_eq!(all.len(), 81);
    // VLArbitrationTableRecord: four blocks per port.
    let hca = node(&f, "Hca2");
    let q = vl_arb_record::Repr {
        lid: lid_of(&f, hca),
        ..Default::default()
    };
    let recs: Vec<vl_arb_record::Repr> = fx
        .ask(table(vl_arb_record::ATTR_ID, vl_arb_record::comp::LID, &q))
        .records();
    assert_eq!(recs.len(), 4);
    assert_eq!(
        recs.iter().map(|r| r.block_num).collect::<Vec<_>>(),
        [1, 2, 3, 4]
    );
    assert!(
        recs.iter()
            .any(|r| r.vl_arbitration_table != Default::default())
    );
}

#[test]
fn component_masks_select_fields() {
    let mut fx = Fixture::small();
    let f = fx.fabric.clone();
    // By node type: the two switches.
    let q = node_record::Repr {
        node_info: node_info::Repr {
            node_type: node_info::NodeType::Switch,
            ..Default::default()
        },
        ..Default::default()
    };
    let recs: Vec<node_record::Repr> = fx
        .ask(table(
            node_record::ATTR_ID,
            node_record::comp::NODE_TYPE,
            &q,
        ))
        .records();
    assert_eq!(recs.len(), 2);
    // By node GUID and port number.
    let hca = node(&f, "Hca4");
    let q = node_record::Repr {
        node_info: node_info::Repr {
            node_guid: f.node(hca).guid,
            local_port_num: 1,
            ..Default::default()
        },
        ..Default::default()
    };
    let a = fx.ask(get(
        node_record::ATTR_ID,
        node_record::comp::NODE_GUID | node_record::comp::LOCAL_PORT_NUM,
        &q,
    ));
    let r: node_record::Repr = a.records()[0];
    assert_eq!(r.node_description.as_string(), "Hca4");
    // By description.
    let q = node_record::Repr {
        node_description: sm_mad::node_description::Repr::new("Switch2"),
        ..Default::default()
    };
    let recs: Vec<node_record::Repr> = fx
        .ask(table(
            node_record::ATTR_ID,
            node_record::comp::NODE_DESCRIPTION,
            &q,
        ))
        .records();
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0].lid, lid_of(&f, node(&f, "Switch2")));
    // PortInfoRecord by port state: every ACTIVE port (12 link ends, 2 switch port 0s).
    let q = port_info_record::Repr {
        port_info: port_info::Repr {
            port_state: port_info::PortState::Active,
            ..Default::default()
        },
        ..Default::default()
    };
    let recs: Vec<port_info_record::Repr> = fx
        .ask(table(
            port_info_record::ATTR_ID,
            port_info_record::comp::PORT_STATE,
            &q,
        ))
        .records();
    assert_eq!(recs.len(), 14);
}

/// Sends a malformed or refused request and returns the answer's status.
fn status_of(fx: &mut Fixture, req: sa::Repr) -> MadStatus {
    fx.ask(req).status()
}

#[test]
fn error_statuses() {
    let mut fx = Fixture::small();
    let f = fx.fabric.clone();
    let hca = lid_of(&f, node(&f, "Hca2"));
    let nr = |lid| node_record::Repr {
        lid,
        ..Default::default()
    };
    // Get: nothing matches / more than one matches.
    assert_eq!(
        status_of(
            &mut fx,
            get(node_record::ATTR_ID, node_record::comp::LID, &nr(Lid(999)))
        ),
        sa::ERR_NO_RECORDS
    );
    let a = fx.ask(get(node_record::ATTR_ID, 0, &nr(Lid(0))));
    assert_eq!(a.status(), sa::ERR_TOO_MANY_RECORDS);
    assert_eq!(a.head.method, Method::GetResp);
    // A GetTable with nothing to show is an empty table, not an error.
    let a = fx.ask(table(
        node_record::ATTR_ID,
        node_record::comp::LID,
        &nr(Lid(999)),
    ));
    assert_eq!((a.status(), a.payload.len()), (MadStatus::OK, 0));
    // Component mask bits beyond the record's components.
    assert_eq!(
        status_of(&mut fx, table(node_record::ATTR_ID, 1 << 15, &nr(hca))),
        sa::ERR_REQ_INVALID
    );
    // An AttributeOffset that is not the record's.
    let mut req = table(node_record::ATTR_ID, 1, &nr(hca));
    req.attribute_offset = 3;
    assert_eq!(status_of(&mut fx, req), sa::ERR_REQ_INVALID);
    // Unknown attribute; a method the attribute does not take; a method SA does not have.
    assert_eq!(
        status_of(&mut fx, sa::Repr::request(Method::Get, Tid(0), 0x0099, 0)),
        MadStatus::METHOD_ATTR_UNSUPPORTED
    );
    let mut set = get(node_record::ATTR_ID, 1, &nr(hca));
    set.method = Method::Set;
    let a = fx.ask(set);
    assert_eq!(a.status(), MadStatus::METHOD_ATTR_UNSUPPORTED);
    assert_eq!(a.head.method, Method::GetResp, "Set is answered by GetResp");
    let mut del = get(node_record::ATTR_ID, 1, &nr(hca));
    del.method = Method::Delete;
    let a = fx.ask(del);
    assert_eq!(
        (a.status(), a.head.method),
        (MadStatus::METHOD_ATTR_UNSUPPORTED, Method::DeleteResp)
    );
    let mut send = get(node_record::ATTR_ID, 1, &nr(hca));
    send.method = Method::Send;
    assert_eq!(status_of(&mut fx, send), MadStatus::METHOD_UNSUPPORTED);
    // Bad class version.
    let mut b = get(node_record::ATTR_ID, 1, &nr(hca)).to_bytes().unwrap();
    b[2] = 1;
    b[8..16].copy_from_slice(&0x77u64.to_be_bytes());
    // (The simulated fabric refuses to carry a MAD whose header is invalid: straight in.)
    fx.d.sm
        .handle_mad(Instant::from_nanos(fx.d.now()), fx.client_lid(), &b);
    let t = fx.d.sm.poll_transmit().expect("an answer");
    assert_eq!(t.dlid, fx.client_lid());
    assert_eq!(t.gsi.unwrap().lid, fx.client_lid());
    assert_eq!(t.mad.len(), 256);
    assert_eq!((t.mad[2], t.mad[3]), (1, 0x81));
    assert_eq!(
        u16::from_be_bytes([t.mad[4], t.mad[5]]),
        MadStatus::BAD_VERSION.0
    );
    // PathRecord naming neither end: every path of the subnet, as OpenSM answers (six end
    // ports: four HCAs and two switches).
    use path_record::comp;
    let a = fx.ask(table(path_record::ATTR_ID, 0, &pr_query(hca, Lid(0))));
    assert_eq!(a.status(), MadStatus::OK);
    let all: Vec<path_record::Repr> = a.records();
    assert_eq!(all.len(), 36);
    let pairs: std::collections::BTreeSet<(Lid, Lid)> =
        all.iter().map(|r| (r.slid, r.dlid)).collect();
    assert_eq!(pairs.len(), 36, "each ordered pair once");
    // Only the source: every destination (OpenSM's "half world", which osmtest uses).
    let a = fx.ask(table(
        path_record::ATTR_ID,
        comp::SLID,
        &pr_query(hca, Lid(0)),
    ));
    assert_eq!(a.status(), MadStatus::OK);
    assert_eq!(a.records::<path_record::Repr>().len(), 6);
    // Half a ServiceID.
    assert_eq!(
        status_of(
            &mut fx,
            get(
                path_record::ATTR_ID,
                PR_LIDS | comp::SERVICE_ID_MSB,
                &pr_query(hca, hca)
            )
        ),
        sa::ERR_REQ_INSUFFICIENT_COMPONENTS
    );
    // An unknown GID; an invalid MTU.
    let q = path_record::Repr {
        dgid: Gid::new(0xfe80_0000_0000_0000, Guid(0xdead)),
        ..Default::default()
    };
    assert_eq!(
        status_of(&mut fx, get(path_record::ATTR_ID, comp::DGID, &q)),
        sa::ERR_REQ_INVALID_GID
    );
    let mut q = pr_query(hca, hca);
    q.mtu = Mtu::from_raw_value(9);
    assert_eq!(
        status_of(
            &mut fx,
            get(
                path_record::ATTR_ID,
                PR_LIDS | comp::MTU | comp::MTU_SELECTOR,
                &q
            )
        ),
        sa::ERR_REQ_INVALID
    );
    // GetMulti must travel by RMPP.
    let mut gm = table(multipath_record::ATTR_ID, 0, &pr_query(hca, hca));
    gm.method = Method::GetMulti;
    let a = fx.ask(gm);
    assert_eq!(a.status(), sa::ERR_REQ_INVALID);
    assert_eq!(
        a.head.attr_id,
        path_record::ATTR_ID,
        "answered as PathRecord"
    );
    // A short MAD: the header echoed with ERR_REQ_INVALID.
    let mut short = get(node_record::ATTR_ID, 1, &nr(hca))
        .to_bytes()
        .unwrap()
        .to_vec();
    short[8..16].copy_from_slice(&0x78u64.to_be_bytes());
    short.truncate(100);
    fx.d.sm
        .handle_mad(Instant::from_nanos(fx.d.now()), fx.client_lid(), &short);
    let stats = fx.d.sm.sa().stats();
    assert!(stats.errors >= 14, "{stats:?}");
}

/// The rate code of a port's link (width x lane speed), computed here independently.
fn link_rate(width: u8, speed: Speed) -> Rate {
    let lanes = match width {
        link_width::X1 => 1,
        link_width::X2 => 2,
        link_width::X8 => 8,
        link_width::X12 => 12,
        _ => 4,
    };
    let lane = match (speed.ext2, speed.ext, speed.speed) {
        (1, _, _) => 200_000,
        (_, link_speed_ext::EDR, _) => 25_000,
        (_, link_speed_ext::HDR, _) => 50_000,
        (_, _, 2) => 5000,
        (_, _, 4) => 10000,
        _ => 2500,
    };
    Rate::from_mbps(lanes * lane).unwrap()
}

/// MTU and rate along the way a packet really takes (the simulator's tracer), from the
/// fabric's port attributes: the smallest MTU cap and slowest link of every port crossed.
fn traced_minima(fx: &Fixture, slid: Lid, dlid: Lid) -> (Mtu, Rate) {
    let path = fx.d.sim.trace(slid, dlid, Sl(0), PKey(0xffff)).unwrap();
    let f = &fx.orig;
    let mut mtu = u8::MAX;
    let mut rate = Rate::Gbps1200;
    for hop in &path.hops {
        let n = f.node_by_guid(hop.node).unwrap();
        let out = f.port_of(n, hop.out_port).unwrap();
        for p in [out, f.port(out).remote.unwrap()] {
            let port = f.port(p);
            mtu = mtu.min(port.mtu_cap);
            let r = link_rate(port.width, port.speed);
            if r.mbps() < rate.mbps() {
                rate = r;
            }
        }
    }
    (Mtu::from_raw_value(mtu), rate)
}

/// A fat-tree with some links slowed (narrower, slower) and some ports with smaller MTUs.
fn mixed_fabric() -> Fabric {
    let mut f = sm_core::generate::generate(&sm_core::generate::GenSpec::FatTree2(
        sm_core::generate::FatTree2::new(8),
    ))
    .unwrap();
    let links: Vec<(PortIdx, PortIdx)> = f.links().collect();
    let mut x = 0x2545_f491u32;
    for (i, (a, b)) in links.into_iter().enumerate() {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        // Some links run extended speeds (EDR, HDR), which agents show only to an SM that
        // sets PortInfo attribute modifier bit 31.
        let (width, speed, ext) = match x % 7 {
            0 => (link_width::X1, 1, 0),
            1 => (link_width::X4, 2, 0),
            2 => (link_width::X12, 4, 0),
            3 => (link_width::X4, 4, 0),
            4 => (link_width::X4, 4, link_speed_ext::EDR),
            5 => (link_width::X2, 4, link_speed_ext::HDR),
            _ => (link_width::X4, 1, 0),
        };
        for p in [a, b] {
            let port = f.port_mut(p);
            port.width = width;
            port.speed = Speed {
                speed,
                ext,
                ..Speed::SDR
            };
        }
        if i % 7 == 3 {
            f.port_mut(a).mtu_cap = 3;
        }
        if i % 11 == 5 {
            f.port_mut(b).mtu_cap = 4;
        }
    }
    f
}

#[test]
fn path_record_mtu_and_rate_are_the_minima_along_the_lft_path() {
    let mut fx = Fixture::up(mixed_fabric(), Params::default(), SimConfig::default());
    let f = fx.fabric.clone();
    let cas: Vec<Lid> = ca_ports(&f).iter().map(|&p| f.port(p).lid).collect();
    let mut checked = 0;
    let mut seen_mtu = std::collections::BTreeSet::new();
    let mut seen_rate = std::collections::BTreeSet::new();
    for (i, &s) in cas.iter().enumerate() {
        for &d in cas.iter().skip(i % 3).step_by(3) {
            let a = fx.ask(get(path_record::ATTR_ID, PR_LIDS, &pr_query(s, d)));
            assert_eq!(a.status(), MadStatus::OK, "{s} -> {d}");
            let r: path_record::Repr = a.records()[0];
            let (mtu, rate) = traced_minima(&fx, s, d);
            if s == d {
                assert_eq!(r.packet_life_time, 0, "loopback");
                continue;
            }
            assert_eq!(r.mtu, mtu, "{s} -> {d}");
            assert_eq!(r.rate, rate, "{s} -> {d}");
            assert_eq!((r.slid, r.dlid), (s, d));
            assert_eq!(r.packet_life_time, 18, "the subnet timeout, as OpenSM");
            assert_eq!(r.mtu_selector, Selector::Exactly);
            assert!(r.reversible);
            assert_eq!(r.p_key, PKey(0xffff));
            assert_eq!(r.sl, Sl(0));
            assert_eq!(r.hop_limit, 0);
            let sp = f.port(f.port_by_guid(r.sgid.guid()).unwrap());
            assert_eq!(sp.lid, s);
            seen_mtu.insert(mtu.to_raw_value());
            seen_rate.insert(rate.to_raw_value());
            checked += 1;
        }
    }
    assert!(checked > 300, "{checked}");
    assert!(
        seen_mtu.len() >= 2 && seen_rate.len() >= 4,
        "{seen_mtu:?} {seen_rate:?}"
    );
}

/// XDR links (the second extended speed field, declared in CapabilityMask2): the agents
/// show them only to an SM that sets attribute modifier bit 31, the model keeps them, and
/// PathRecord prices a path by its slowest link: 800 Gb/s on 4x XDR all the way, 200 Gb/s
/// to or from the one host whose link runs 4x HDR.
#[test]
fn xdr_links_are_seen_and_priced() {
    let mut f = small();
    let slow = node(&f, "Hca4");
    let links: Vec<(PortIdx, PortIdx)> = f.links().collect();
    for (a, b) in links {
        let hdr = [a, b].iter().any(|&p| f.port(p).node == slow);
        for p in [a, b] {
            let port = f.port_mut(p);
            port.width = link_width::X4;
            port.speed = if hdr {
                Speed::from_name("HDR").unwrap()
            } else {
                Speed::from_name("XDR").unwrap()
            };
        }
    }
    let mut fx = Fixture::up(f, Params::default(), SimConfig::default());
    let f = fx.fabric.clone();
    let plan = fx.d.sm.plan().unwrap().fabric.clone();
    let linked: Vec<PortIdx> = (0..f.ports().len() as u32)
        .map(PortIdx)
        .filter(|&p| f.port(p).remote.is_some())
        .collect();
    for &p in &linked {
        assert_eq!(
            plan.port(p).speed.name(),
            f.port(p).speed.name(),
            "{:?}",
            f.port(p)
        );
    }
    assert!(linked.iter().any(|&p| plan.port(p).speed.name() == "XDR"));
    let cas: Vec<Lid> = ca_ports(&f).iter().map(|&p| f.port(p).lid).collect();
    let mut seen = std::collections::BTreeSet::new();
    for &s in &cas {
        for &d in &cas {
            if s == d {
                continue;
            }
            let a = fx.ask(get(path_record::ATTR_ID, PR_LIDS, &pr_query(s, d)));
            assert_eq!(a.status(), MadStatus::OK, "{s} -> {d}");
            let r: path_record::Repr = a.records()[0];
            let (_, rate) = traced_minima(&fx, s, d);
            assert_eq!(r.rate, rate, "{s} -> {d}");
            seen.insert(r.rate.to_raw_value());
        }
    }
    let want: std::collections::BTreeSet<u8> = [Rate::Gbps800, Rate::Gbps200]
        .iter()
        .map(|r| r.to_raw_value())
        .collect();
    assert_eq!(seen, want);
}

#[test]
fn path_record_selectors_and_requested_fields() {
    let mut fx = Fixture::up(mixed_fabric(), Params::default(), SimConfig::default());
    let f = fx.fabric.clone();
    let cas: Vec<Lid> = ca_ports(&f).iter().map(|&p| f.port(p).lid).collect();
    // A pair whose path is neither the fastest MTU nor the slowest rate.
    let (s, d, base) = cas
        .iter()
        .flat_map(|&s| cas.iter().map(move |&d| (s, d)))
        .filter(|(s, d)| s != d)
        .find_map(|(s, d)| {
            let r: path_record::Repr = fx
                .ask(get(path_record::ATTR_ID, PR_LIDS, &pr_query(s, d)))
                .records()[0];
            (r.mtu.to_raw_value() < 5 && r.rate != Rate::Gbps2_5).then_some((s, d, r))
        })
        .unwrap();
    use path_record::comp;
    let ask = |fx: &mut Fixture, mask: u64, f: &dyn Fn(&mut path_record::Repr)| {
        let mut q = pr_query(s, d);
        f(&mut q);
        fx.ask(get(path_record::ATTR_ID, PR_LIDS | mask, &q))
    };
    let mtu = base.mtu.to_raw_value();
    let mtu_q = |sel, v: u8| {
        move |q: &mut path_record::Repr| {
            q.mtu_selector = sel;
            q.mtu = Mtu::from_raw_value(v);
        }
    };
    let m = comp::MTU | comp::MTU_SELECTOR;
    // Exactly the path's MTU; a smaller one is granted; a larger one is not.
    let r: path_record::Repr = ask(&mut fx, m, &mtu_q(Selector::Exactly, mtu)).records()[0];
    assert_eq!(r.mtu.to_raw_value(), mtu);
    let r: path_record::Repr = ask(&mut fx, m, &mtu_q(Selector::Exactly, 1)).records()[0];
    assert_eq!(r.mtu, Mtu::Mtu256);
    if mtu < 5 {
        assert_eq!(
            ask(&mut fx, m, &mtu_q(Selector::Exactly, mtu + 1)).status(),
            sa::ERR_NO_RECORDS
        );
    }
    // Greater than: only if the path's is larger. Less than: the next smaller.
    assert_eq!(
        ask(&mut fx, m, &mtu_q(Selector::GreaterThan, mtu)).status(),
        sa::ERR_NO_RECORDS
    );
    let r: path_record::Repr = ask(&mut fx, m, &mtu_q(Selector::GreaterThan, 1)).records()[0];
    assert_eq!(r.mtu.to_raw_value(), mtu);
    let r: path_record::Repr = ask(&mut fx, m, &mtu_q(Selector::LessThan, mtu)).records()[0];
    assert_eq!(r.mtu.to_raw_value(), mtu - 1);
    let r: path_record::Repr = ask(&mut fx, m, &mtu_q(Selector::Largest, 1)).records()[0];
    assert_eq!(r.mtu.to_raw_value(), mtu);
    // Rate.
    let rm = comp::RATE | comp::RATE_SELECTOR;
    let rate_q = |sel, v: Rate| {
        move |q: &mut path_record::Repr| {
            q.rate_selector = sel;
            q.rate = v;
        }
    };
    let r: path_record::Repr =
        ask(&mut fx, rm, &rate_q(Selector::LessThan, base.rate)).records()[0];
    assert_eq!(r.rate, base.rate.slower().unwrap());
    assert_eq!(
        ask(&mut fx, rm, &rate_q(Selector::GreaterThan, base.rate)).status(),
        sa::ERR_NO_RECORDS
    );
    assert_eq!(
        ask(&mut fx, rm, &rate_q(Selector::Exactly, Rate::Gbps1200)).status(),
        sa::ERR_NO_RECORDS
    );
    // Packet lifetime.
    let lm = comp::PACKET_LIFE_TIME | comp::PACKET_LIFE_TIME_SELECTOR;
    let life_q = |sel, v: u8| {
        move |q: &mut path_record::Repr| {
            q.packet_life_time_selector = sel;
            q.packet_life_time = v;
        }
    };
    let r: path_record::Repr = ask(&mut fx, lm, &life_q(Selector::LessThan, 10)).records()[0];
    assert_eq!(r.packet_life_time, 9);
    let r: path_record::Repr = ask(&mut fx, lm, &life_q(Selector::Exactly, 10)).records()[0];
    assert_eq!(
        r.packet_life_time, 10,
        "OpenSM grants an exact lifetime below the path's"
    );
    assert_eq!(
        ask(&mut fx, lm, &life_q(Selector::Exactly, 20)).status(),
        sa::ERR_NO_RECORDS
    );
    assert_eq!(
        ask(&mut fx, lm, &life_q(Selector::GreaterThan, 18)).status(),
        sa::ERR_NO_RECORDS
    );
    // A requested SL is honoured (no QoS: every SL is allowed).
    let r: path_record::Repr = ask(&mut fx, comp::SL, &|q| q.sl = Sl(5)).records()[0];
    assert_eq!(r.sl, Sl(5));
    // By GIDs instead of LIDs: the same path.
    let q = path_record::Repr {
        sgid: base.sgid,
        dgid: base.dgid,
        ..Default::default()
    };
    let r: path_record::Repr = fx
        .ask(get(path_record::ATTR_ID, comp::SGID | comp::DGID, &q))
        .records()[0];
    assert_eq!((r.slid, r.dlid, r.mtu, r.rate), (s, d, base.mtu, base.rate));
    // SGID and SLID naming different ports.
    let q = path_record::Repr {
        sgid: base.dgid,
        slid: s,
        dlid: d,
        ..Default::default()
    };
    assert_eq!(
        fx.ask(get(path_record::ATTR_ID, PR_LIDS | comp::SGID, &q))
            .status(),
        sa::ERR_REQ_INVALID
    );
    // Only a destination: every source that reaches it (GetTable).
    let q = pr_query(Lid(0), d);
    let all: Vec<path_record::Repr> = fx
        .ask(table(path_record::ATTR_ID, comp::DLID, &q))
        .records();
    assert_eq!(
        all.len(),
        f.end_ports()
            .filter(|&p| f.port(p).lid.0 != 0 && (f.port(p).num == 0 || f.port(p).remote.is_some()))
            .count()
    );
    assert!(all.iter().all(|r| r.dlid == d));
}

#[test]
fn path_records_give_the_layered_sls_that_keep_a_dragonfly_deadlock_free() {
    use sm_core::generate::{Dragonfly, GenSpec, generate};
    let f = generate(&GenSpec::Dragonfly(Dragonfly::new(9, 4, 2))).unwrap();
    let params = Params {
        routing: "layered".into(),
        ..Params::default()
    };
    let mut fx = Fixture::up(f, params, SimConfig::default());
    let plan = fx.d.sm.plan().unwrap().clone();
    let vls = plan.vls_used().expect("layered routes carry SLs");
    assert!(vls >= 2, "this dragonfly needs more than one VL");
    // Every path of the subnet in one query.
    let a = fx.ask(table(path_record::ATTR_ID, 0, &pr_query(Lid(0), Lid(0))));
    assert_eq!(a.status(), MadStatus::OK);
    let all: Vec<path_record::Repr> = a.records();
    let mut sl_of = HashMap::new();
    for r in &all {
        let src = plan.fabric.port_by_guid(r.sgid.guid()).unwrap();
        assert_eq!(
            Some(r.sl.0),
            plan.path_sl(src, r.dlid),
            "{} -> {}",
            r.slid,
            r.dlid
        );
        sl_of.insert((r.slid, r.dlid), r.sl);
    }
    let used: std::collections::BTreeSet<u8> = sl_of.values().map(|s| s.0).collect();
    assert_eq!(
        used.len(),
        vls as usize,
        "PathRecords name every SL the routes use"
    );
    // The simulated fabric carries each pair on its PathRecord's SL through the SL-to-VL
    // tables the SM programmed: all delivered, no credit loop across the VLs.
    let f = plan.fabric.clone();
    let traced = support::traced_without_credit_loops(&fx.d, "dragonfly", |s, dlid| {
        sl_of[&(f.port(s).lid, dlid)]
    });
    assert_eq!(
        traced.len(),
        vls as usize,
        "SL i travels on VL i: {traced:?}"
    );
    // The simulated switches advertise optimized SL-to-VL programming: one Set per output
    // port covered every input port, and every (input, output) pair holds SL i -> VL i.
    // The modifiers of the SL-to-VL Sets a plan sends switches.
    let switch_sl2vl = |plan: &sm_daemon::core::Plan| -> Vec<sm_mad::sl2vl::Modifier> {
        plan.tables
            .iter()
            .filter(|tb| {
                tb.attr == sm_mad::attr::SL_TO_VL_MAPPING_TABLE
                    && f.node(f.port(tb.port).node).kind == sm_core::NodeKind::Switch
            })
            .map(|tb| sm_mad::sl2vl::Modifier::from_attr_mod(tb.modifier).unwrap())
            .collect()
    };
    let switch_sets = switch_sl2vl(&plan);
    assert!(switch_sets.iter().any(|m| m.all_input_ports));
    assert!(
        switch_sets
            .iter()
            .all(|m| m.all_input_ports || m.input_port.0 == 0)
    );
    for n in f.switches() {
        let sw = fx.d.sim.node(n).switch.as_ref().unwrap();
        let np = f.node(n).num_ports;
        let linked: Vec<u8> = f
            .node_ports(n)
            .filter(|&q| f.port(q).num != 0 && f.port(q).remote.is_some())
            .map(|q| f.port(q).num)
            .collect();
        for &i in std::iter::once(&0).chain(&linked) {
            for &o in &linked {
                let t = sw.sl2vl(np, i, o);
                for sl in 0..vls {
                    assert_eq!(t[usize::from(sl)], sl, "switch {n:?} {i}->{o} SL {sl}");
                }
            }
        }
    }
    // `[qos] optimized_sl2vl = false`: one Set per pair, and the same tables held.
    let off = Fixture::up(
        generate(&GenSpec::Dragonfly(Dragonfly::new(9, 4, 2))).unwrap(),
        Params {
            routing: "layered".into(),
            qos: QosOptions {
                optimized_sl2vl: false,
                ..QosOptions::default()
            },
            ..Params::default()
        },
        SimConfig::default(),
    );
    let pairs = switch_sl2vl(off.d.sm.plan().unwrap());
    assert!(pairs.iter().all(|m| !m.is_optimized()));
    assert!(
        pairs.len() > switch_sets.len() * 2,
        "{} Sets per pair",
        pairs.len()
    );
    for n in f.switches() {
        let (a, b) = (
            fx.d.sim.node(n).switch.as_ref().unwrap(),
            off.d.sim.node(n).switch.as_ref().unwrap(),
        );
        let np = f.node(n).num_ports;
        let linked = |p: u8| f.port_of(n, p).is_some_and(|q| f.port(q).remote.is_some());
        for i in (0..=np).filter(|&i| i == 0 || linked(i)) {
            for o in (1..=np).filter(|&o| linked(o)) {
                assert_eq!(
                    a.sl2vl(np, i, o),
                    b.sl2vl(np, i, o),
                    "switch {n:?} {i}->{o}"
                );
            }
        }
    }
    // Asking for another SL than the routes chose gets no path, as from OpenSM.
    let r = all.iter().find(|r| r.sl.0 == 1).unwrap();
    let ask = |fx: &mut Fixture, sl: u8| {
        let q = path_record::Repr {
            sl: Sl(sl),
            ..pr_query(r.slid, r.dlid)
        };
        fx.ask(get(
            path_record::ATTR_ID,
            PR_LIDS | path_record::comp::SL,
            &q,
        ))
    };
    assert_eq!(ask(&mut fx, 0).status(), sa::ERR_NO_RECORDS);
    let ok = ask(&mut fx, 1);
    assert_eq!(ok.status(), MadStatus::OK);
    assert_eq!(ok.records::<path_record::Repr>()[0].sl, Sl(1));
}

#[test]
fn lmc_paths_in_opensm_order() {
    let params = Params {
        lmc: 2,
        ..Params::default()
    };
    let mut fx = Fixture::up(small(), params, SimConfig::default());
    let f = fx.fabric.clone();
    let a = f.port(ca_ports(&f)[1]);
    let b = f.port(ca_ports(&f)[2]);
    assert_eq!((a.lmc, b.lmc), (2, 2));
    let q = path_record::Repr {
        sgid: Gid::new(0xfe80_0000_0000_0000, a.guid),
        dgid: Gid::new(0xfe80_0000_0000_0000, b.guid),
        ..Default::default()
    };
    use path_record::comp;
    let all: Vec<path_record::Repr> = fx
        .ask(table(path_record::ATTR_ID, comp::SGID | comp::DGID, &q))
        .records();
    assert_eq!(all.len(), 16, "every LID pair");
    // The four fully redundant pairs first (preference 0), then the rest (preference 2).
    for (i, r) in all.iter().enumerate().take(4) {
        assert_eq!(r.preference, 0);
        assert_eq!(
            (r.slid.0, r.dlid.0),
            (a.lid.0 + i as u16, b.lid.0 + i as u16)
        );
    }
    assert!(all[4..].iter().all(|r| r.preference == 2));
    let pairs: std::collections::BTreeSet<(u16, u16)> =
        all.iter().map(|r| (r.slid.0, r.dlid.0)).collect();
    assert_eq!(pairs.len(), 16);
    // Each LID pair is a path the fabric delivers.
    for r in &all {
        assert!(fx.d.sim.trace(r.slid, r.dlid, Sl(0), PKey(0xffff)).is_ok());
    }
    // NumbPath limits the answer; a Get gives one.
    let q5 = path_record::Repr { numb_path: 5, ..q };
    let five: Vec<path_record::Repr> = fx
        .ask(table(
            path_record::ATTR_ID,
            comp::SGID | comp::DGID | comp::NUMB_PATH,
            &q5,
        ))
        .records();
    assert_eq!(five[..], all[..5]);
    let one: Vec<path_record::Repr> = fx
        .ask(get(path_record::ATTR_ID, comp::SGID | comp::DGID, &q))
        .records();
    assert_eq!(one[..], all[..1]);
    // A DLID inside the destination's LMC range.
    let r: path_record::Repr = fx
        .ask(get(
            path_record::ATTR_ID,
            PR_LIDS,
            &pr_query(a.lid, Lid(b.lid.0 + 3)),
        ))
        .records()[0];
    assert_eq!(r.dgid.guid(), b.guid);
}

#[test]
fn paths_need_a_shared_partition() {
    let f = small();
    let guid = |desc: &str| {
        let n = node(&f, desc);
        f.port(f.port_of(n, 1).unwrap()).guid.0
    };
    // Hca3 and Hca4 (the client) in partition 0x10; the default partition limited for all
    // but the SM and the client.
    let text = format!(
        "Default=0x7fff : ALL=limited, SELF=full, {:#018x}=full ;\nblue=0x0010, sl=3 : {:#018x}=full, {:#018x}=full ;\n",
        guid("Hca4"),
        guid("Hca3"),
        guid("Hca4"),
    );
    let params = Params {
        partitions: Partitions::parse(&text, Path::new("p.conf")).unwrap(),
        qos: QosOptions {
            enabled: true,
            ..QosOptions::default()
        },
        ..Params::default()
    };
    let mut fx = Fixture::up(f, params, SimConfig::default());
    let f = fx.fabric.clone();
    let lid = |d: &str| lid_of(&f, node(&f, d));
    // Hca3 - Hca4 share blue: the path carries it, with the partition's SL.
    let r: path_record::Repr = fx
        .ask(get(
            path_record::ATTR_ID,
            PR_LIDS,
            &pr_query(lid("Hca3"), lid("Hca4")),
        ))
        .records()[0];
    assert_eq!(r.p_key, PKey(0x8010));
    assert_eq!(r.sl, Sl(3));
    assert!(
        fx.d.sim.trace(r.slid, r.dlid, r.sl, r.p_key).is_ok(),
        "the fabric delivers what the SA promised"
    );
    // Hca2 - Hca3: both limited members of the default partition only: no path.
    let a = fx.ask(get(
        path_record::ATTR_ID,
        PR_LIDS,
        &pr_query(lid("Hca2"), lid("Hca3")),
    ));
    assert_eq!(
        a.status(),
        sa::ERR_NO_RECORDS,
        "{:?}",
        a.records::<path_record::Repr>()
    );
    let a = fx.ask(table(
        path_record::ATTR_ID,
        PR_LIDS,
        &pr_query(lid("Hca2"), lid("Hca3")),
    ));
    assert_eq!((a.status(), a.payload.len()), (MadStatus::OK, 0));
    // Asking for a key they do not share.
    use path_record::comp;
    let q = path_record::Repr {
        p_key: PKey(0x8001),
        ..pr_query(lid("Hca3"), lid("Hca4"))
    };
    assert_eq!(
        fx.ask(get(path_record::ATTR_ID, PR_LIDS | comp::P_KEY, &q))
            .status(),
        sa::ERR_NO_RECORDS
    );
    // The default partition, which the client holds in full, is shared too.
    let q = path_record::Repr {
        p_key: PKey(0x7fff),
        ..q
    };
    let r: path_record::Repr = fx
        .ask(get(path_record::ATTR_ID, PR_LIDS | comp::P_KEY, &q))
        .records()[0];
    assert_eq!(
        r.p_key,
        PKey(0x7fff),
        "the requested key, as OpenSM answers"
    );
    // Hca1 (the SM, full default member) reaches Hca2 over the default partition.
    let r: path_record::Repr = fx
        .ask(get(
            path_record::ATTR_ID,
            PR_LIDS,
            &pr_query(lid("Hca1"), lid("Hca2")),
        ))
        .records()[0];
    assert_eq!(r.p_key, PKey(0xffff));
}

#[test]
fn rmpp_tables_survive_loss_byte_for_byte() {
    let mut fx = Fixture::up(
        sm_core::generate::generate(&sm_core::generate::GenSpec::FatTree2(
            sm_core::generate::FatTree2::new(8),
        ))
        .unwrap(),
        Params::default(),
        SimConfig::default(),
    );
    let q = port_info_record::Repr::default();
    let clean = fx.ask(table(port_info_record::ATTR_ID, 0, &q));
    assert_eq!(clean.status(), MadStatus::OK);
    let segments = clean.payload.len().div_ceil(200);
    assert!(segments > 20, "{segments} segments");
    let recs: Vec<port_info_record::Repr> = clean.records();
    assert_eq!(
        recs.len(),
        fx.fabric
            .ports()
            .iter()
            .filter(|p| p.exists && (p.num == 0 || p.remote.is_some()))
            .count()
    );
    for loss in [0.05, 0.15] {
        fx.d.sim.set_faults(sm_sim::Faults {
            loss,
            ..sm_sim::Faults::default()
        });
        let before = fx.d.sm.sa().stats();
        let lossy = fx.ask(table(port_info_record::ATTR_ID, 0, &q));
        fx.d.sim.set_faults(sm_sim::Faults::default());
        assert_eq!(lossy.status(), MadStatus::OK);
        assert_eq!(lossy.head.attribute_offset, clean.head.attribute_offset);
        // Records are the same except the live counters the ports may have changed.
        assert_eq!(lossy.payload.len(), clean.payload.len(), "loss {loss}");
        let a: Vec<port_info_record::Repr> = lossy.records();
        for (x, y) in a.iter().zip(&recs) {
            assert_eq!((x.endport_lid, x.port_num), (y.endport_lid, y.port_num));
        }
        assert!(lossy.mads > segments, "loss {loss}: retransmissions");
        // A transfer may still be abandoned when enough segments and ACKs are lost in a
        // row; the client then asks again, and some transfer completes.
        let after = fx.d.sm.sa().stats();
        assert!(after.transfers_done > before.transfers_done);
    }
}

#[test]
fn get_multi_multipath_records_both_ways_by_rmpp() {
    let params = Params {
        lmc: 1,
        ..Params::default()
    };
    let mut fx = Fixture::up(small(), params, SimConfig::default());
    let f = fx.fabric.clone();
    let gid = |d: &str| {
        let p = f.port_of(node(&f, d), 1).unwrap();
        Gid::new(0xfe80_0000_0000_0000, f.port(p).guid)
    };
    let rec = multipath_record::Repr::between(&[gid("Hca1")], &[gid("Hca2"), gid("Hca3")]).unwrap();
    let mut payload = vec![0u8; multipath_record::LEN];
    rec.emit(&mut payload).unwrap();
    payload.truncate(multipath_record::HEADER_LEN + 16 * 3);
    use multipath_record::comp;
    let mut h = sa::Repr::request(
        Method::GetMulti,
        Tid(0x4d50_0001),
        multipath_record::ATTR_ID,
        comp::SGID_COUNT | comp::DGID_COUNT,
    );
    h.rmpp.rmpp_flags = sm_mad::rmpp::RmppFlags::ACTIVE;
    let seg = Segmenter::sa(&h, payload).unwrap();
    let mut tx: RmppSender<u64> = RmppSender::new(seg, SenderConfig::default(), fx.d.now());
    while let Some(m) = tx.poll_transmit() {
        fx.send(&m);
    }
    let mut rx = RmppReceiver::sa();
    let deadline = fx.d.now() + 30_000_000_000;
    while *rx.state() != ReceiverState::Complete && fx.d.now() < deadline {
        while let Some(m) = fx.d.sim.recv(fx.client) {
            let r = rmpp::Repr::parse_mad(&m.mad).unwrap();
            assert!(r.is_active(), "{:?}", sa::Repr::parse(&m.mad));
            if r.rmpp_type == sm_mad::rmpp::RmppType::Ack {
                tx.handle_mad(fx.d.now(), &m.mad).unwrap();
            } else {
                rx.handle_mad(&m.mad).unwrap();
                while let Some(a) = rx.poll_transmit() {
                    fx.send(&a);
                }
            }
        }
        assert!(fx.d.step());
    }
    assert_eq!(
        *tx.state(),
        sm_mad::rmpp::SenderState::Done,
        "request acknowledged"
    );
    let mut h = rx.header().unwrap().to_vec();
    h.resize(256, 0);
    let head = sa::Repr::parse(&h).unwrap();
    assert_eq!(head.method, Method::GetMultiResp);
    assert_eq!(
        head.attr_id,
        path_record::ATTR_ID,
        "answered with PathRecords"
    );
    let paths: Vec<path_record::Repr> = sa::records(rx.payload().unwrap(), head.attribute_offset)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    // Two destinations, LMC 1: four LID pairs each.
    assert_eq!(paths.len(), 8);
    assert!(paths.iter().all(|p| p.sgid == gid("Hca1")));
    assert_eq!(paths.iter().filter(|p| p.dgid == gid("Hca3")).count(), 4);
    fx.settle();
}

/// A snapshot of a small subnet, for the property tests (built once).
fn db() -> &'static sm_daemon::sa::Db {
    static DB: std::sync::OnceLock<sm_daemon::sa::Db> = std::sync::OnceLock::new();
    DB.get_or_init(|| {
        let params = Params {
            lmc: 1,
            ..Params::default()
        };
        let fx = Fixture::up(small(), params, SimConfig::default());
        fx.d.sm.sa().db().unwrap().clone()
    })
}

/// Feeds one MAD to a fresh server and checks every reply it makes.
fn answers_sanely(mad: &[u8], mode: sm_daemon::sa::RmppMode) {
    use sm_daemon::sa::{Requester, SaConfig, Server};
    let mut srv = Server::new(SaConfig {
        rmpp: mode,
        ..SaConfig::default()
    });
    srv.set_db(db().clone());
    // The requester: a known LID (Hca1's) and an unknown one.
    for lid in [1u16, 0x7777] {
        srv.handle_mad(Instant::from_nanos(5), Requester::at(Lid(lid)), mad);
        srv.handle_timeout(Instant::from_nanos(u64::MAX / 2));
        while let Some(r) = srv.poll_transmit() {
            assert_eq!(r.to.lid, Lid(lid));
            let m = &r.mad;
            assert!(m.len() >= 56, "{} bytes", m.len());
            assert_eq!((m[0], m[1]), (mad[0], 3));
            assert_eq!(m[8..16], mad[8..16], "the request's TID");
            let active = m[26] & 1 != 0;
            assert!(m[3] & 0x80 != 0 || active, "a response, or RMPP control");
            if !active {
                assert_eq!(m.len(), 256);
            }
        }
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(400))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..600)) {
        let mut b = bytes.clone();
        if b.len() > 1 {
            b[1] = 3;
        }
        if b.len() >= 24 {
            answers_sanely(&b, sm_daemon::sa::RmppMode::Segment);
            answers_sanely(&b, sm_daemon::sa::RmppMode::Kernel);
        } else {
            let mut srv = sm_daemon::sa::Server::new(Default::default());
            srv.set_db(db().clone());
            srv.handle_mad(Instant::ZERO, sm_daemon::sa::Requester::at(Lid(1)), &b);
            proptest::prop_assert!(srv.poll_transmit().is_none());
        }
    }

    #[test]
    fn arbitrary_queries_get_an_answer(
        method in proptest::sample::select(vec![0x01u8, 0x02, 0x12, 0x13, 0x14, 0x15, 0x03, 0x06, 0x7f]),
        attr in proptest::sample::select(vec![
            0x0001u16, 0x0003, 0x0011, 0x0012, 0x0013, 0x0014, 0x0015, 0x0016, 0x0017, 0x0018, 0x0020,
            0x0030, 0x0031, 0x0033, 0x0035, 0x0036, 0x0038, 0x003A, 0x00F3, 0x1234,
        ]),
        mask in proptest::prelude::any::<u64>(),
        narrow in proptest::prelude::any::<bool>(),
        attr_mod in proptest::prelude::any::<u32>(),
        sm_key in proptest::sample::select(vec![0u64, 1]),
        rmpp_flags in 0u8..8,
        offset in proptest::sample::select(vec![0u16, 1, 8, 14, 99]),
        data in proptest::collection::vec(proptest::prelude::any::<u8>(), 200),
    ) {
        let mut m = [0u8; 256];
        m[..4].copy_from_slice(&[1, 3, 2, method]);
        m[8..16].copy_from_slice(&0xabcdu64.to_be_bytes());
        m[16..18].copy_from_slice(&attr.to_be_bytes());
        m[20..24].copy_from_slice(&attr_mod.to_be_bytes());
        m[24] = 1;
        m[25] = 1;
        m[26] = rmpp_flags;
        m[36..44].copy_from_slice(&sm_key.to_be_bytes());
        m[44..46].copy_from_slice(&offset.to_be_bytes());
        let mask = if narrow { mask & 0x3f } else { mask };
        m[48..56].copy_from_slice(&mask.to_be_bytes());
        m[56..].copy_from_slice(&data);
        // Mostly small LIDs, so lookups hit.
        m[56] &= 0x00;
        m[57] &= 0x0f;
        answers_sanely(&m, sm_daemon::sa::RmppMode::Segment);
        answers_sanely(&m, sm_daemon::sa::RmppMode::Kernel);
        // Every plain request (no RMPP, SM_Key 0 or ours) is answered.
        if rmpp_flags & 1 == 0 && [0x01u8, 0x02, 0x12, 0x13, 0x14, 0x15, 0x03, 0x06, 0x7f].contains(&method) {
            let mut srv = sm_daemon::sa::Server::new(Default::default());
            srv.set_db(db().clone());
            srv.handle_mad(Instant::ZERO, sm_daemon::sa::Requester::at(Lid(1)), &m);
            proptest::prop_assert!(srv.poll_transmit().is_some(), "no answer");
        }
    }
}

// ---------------------------------------------------------------------------------------
// Multicast groups, services and event subscriptions.

use sm_mad::mcmember_record::{self as mcr, JoinState};
use sm_mad::{inform_info, inform_info_record, notice, service_record};

impl Fixture {
    /// Asks from another endpoint than the fixture's client.
    fn ask_as(&mut self, ep: EndpointId, req: sa::Repr) -> Answer {
        let client = std::mem::replace(&mut self.client, ep);
        let a = self.ask(req);
        self.client = client;
        a
    }

    /// A client endpoint on every linked CA port but the SM's, with its port GUID and LID.
    fn members(&mut self) -> Vec<(EndpointId, Guid, Lid)> {
        let ports: Vec<PortIdx> = ca_ports(&self.orig).into_iter().skip(1).collect();
        ports
            .into_iter()
            .map(|p| {
                let ep = if p == self.client_port {
                    self.client
                } else {
                    self.d.sim.attach(p)
                };
                let port = self.d.sim.port(p);
                (ep, self.orig.port(p).guid, port.info.lid)
            })
            .collect()
    }

    /// Runs the fabric for `ns` of virtual time.
    fn run_for(&mut self, ns: u64) {
        let until = self.d.now() + ns;
        self.d.advance_to(until);
    }

    /// The CA port GUIDs a multicast packet from `src` reaches.
    fn mcast_reach(&self, src: Lid, mlid: Lid) -> Vec<Guid> {
        let m = self.d.sim.trace_multicast(src, mlid).unwrap();
        assert!(m.drops.is_empty(), "{:?}", m.drops);
        let mut g: Vec<Guid> = m.reached_guids.iter().map(|&(g, _)| g).collect();
        g.sort();
        g
    }
}

fn set(attr: u16, mask: u64, rec: &impl Wire) -> sa::Repr {
    sa::Repr {
        method: Method::Set,
        ..get(attr, mask, rec)
    }
}

fn delete(attr: u16, mask: u64, rec: &impl Wire) -> sa::Repr {
    sa::Repr {
        method: Method::Delete,
        ..get(attr, mask, rec)
    }
}

fn port_gid(guid: Guid) -> Gid {
    Gid::new(0xfe80_0000_0000_0000, guid)
}

fn join_rec(mgid: Gid, guid: Guid, state: JoinState) -> mcr::Repr {
    mcr::Repr {
        mgid,
        port_gid: port_gid(guid),
        q_key: 0x1234,
        p_key: PKey(0xffff),
        join_state: state,
        ..mcr::Repr::default()
    }
}

#[test]
fn multicast_joins_program_trees_the_fabric_delivers_to_members_only() {
    let fabric = sm_core::generate::generate(&sm_core::generate::GenSpec::FatTree2(
        sm_core::generate::FatTree2::new(8),
    ))
    .unwrap();
    let mut fx = Fixture::up(fabric, Params::default(), SimConfig::default());
    let members = fx.members();
    assert!(members.len() >= 8);

    // The default partition's IPoIB broadcast group exists from the start, with no member.
    let bcast = mcr::ipoib_broadcast_mgid(PKey(0xffff), mcr::Scope::LinkLocal);
    let groups = fx.ask(table(mcr::ATTR_ID, 0, &mcr::Repr::default()));
    assert_eq!(groups.status(), MadStatus::OK);
    let recs: Vec<mcr::Repr> = groups.records();
    assert!(recs.iter().any(|r| r.mgid == bcast), "{recs:?}");

    // The first member creates a group with an MGID the SA assigns.
    let (ep0, g0, lid0) = members[0];
    let create = fx.ask_as(
        ep0,
        set(
            mcr::ATTR_ID,
            sm_core::mcast::CREATE_COMPS,
            &join_rec(Gid::default(), g0, JoinState::FULL_MEMBER),
        ),
    );
    assert_eq!(create.status(), MadStatus::OK);
    let created: mcr::Repr = create.records()[0];
    assert_eq!(created.mgid.0[0], 0xff, "an assigned multicast GID");
    assert!(created.mlid.is_multicast());
    let (mgid, mlid) = (created.mgid, created.mlid);

    // Three more full members, one non-member, one send-only member.
    let full = [0usize, 1, 3, 5];
    for &i in &full[1..] {
        let (ep, g, _) = members[i];
        let a = fx.ask_as(
            ep,
            set(
                mcr::ATTR_ID,
                sm_core::mcast::JOIN_COMPS,
                &join_rec(mgid, g, JoinState::FULL_MEMBER),
            ),
        );
        assert_eq!(a.status(), MadStatus::OK, "join of member {i}");
        assert_eq!(a.records::<mcr::Repr>()[0].mlid, mlid);
    }
    let (ep6, g6, _) = members[6];
    let a = fx.ask_as(
        ep6,
        set(
            mcr::ATTR_ID,
            sm_core::mcast::JOIN_COMPS,
            &join_rec(mgid, g6, JoinState::NON_MEMBER),
        ),
    );
    assert_eq!(a.status(), MadStatus::OK);
    let (ep7, g7, lid7) = members[7];
    let a = fx.ask_as(
        ep7,
        set(
            mcr::ATTR_ID,
            sm_core::mcast::JOIN_COMPS,
            &join_rec(mgid, g7, JoinState::SEND_ONLY_NON_MEMBER),
        ),
    );
    assert_eq!(a.status(), MadStatus::OK);
    fx.settle();

    // Every receiving member but the sender gets one copy; no one else does.
    let mut receivers: Vec<Guid> = full.iter().map(|&i| members[i].1).collect();
    receivers.push(g6);
    receivers.sort();
    let without =
        |g: Guid| -> Vec<Guid> { receivers.iter().copied().filter(|&x| x != g).collect() };
    assert_eq!(fx.mcast_reach(lid0, mlid), without(g0));
    assert_eq!(
        fx.mcast_reach(lid7, mlid),
        receivers,
        "a send-only member sends"
    );
    let m = fx.d.sim.trace_multicast(lid0, mlid).unwrap();
    assert_eq!(m.reached.len(), receivers.len() - 1, "one copy each");

    // Switches on the tree have MulticastFDBTop at the group's MLID; the others say they
    // hold no group.
    let tops: Vec<Lid> = fx
        .orig
        .switches()
        .map(|n| {
            fx.d.sim
                .node(n)
                .switch
                .as_ref()
                .unwrap()
                .info
                .multicast_fdb_top
        })
        .collect();
    assert!(
        tops.iter().all(|&t| t == mlid || t == Lid(0xBFFF)),
        "{tops:?}"
    );
    assert!(tops.contains(&mlid));

    // The MFTRecords show the masks the switches hold.
    let mfts = fx.ask(table(mft_record::ATTR_ID, 0, &mft_record::Repr::default()));
    let recs: Vec<mft_record::Repr> = mfts.records();
    assert!(!recs.is_empty());
    assert!(recs.iter().all(|r| r.block_num == (mlid.0 - 0xC000) / 32));

    // A PathRecord to the group carries its MLID.
    use path_record::comp;
    let q = path_record::Repr {
        dgid: mgid,
        sgid: port_gid(g0),
        ..Default::default()
    };
    let p: path_record::Repr = fx
        .ask_as(ep0, get(path_record::ATTR_ID, comp::DGID | comp::SGID, &q))
        .records()[0];
    assert_eq!(p.dlid, mlid);

    // A leave: that member gets nothing any more; only the changed blocks are sent.
    let before = fx.d.sm.sa().mcast().get(&mgid).unwrap().len();
    let (ep3, g3, _) = members[3];
    let a = fx.ask_as(
        ep3,
        delete(
            mcr::ATTR_ID,
            sm_core::mcast::JOIN_COMPS,
            &join_rec(mgid, g3, JoinState::FULL_MEMBER),
        ),
    );
    assert_eq!(a.status(), MadStatus::OK);
    fx.settle();
    assert_eq!(fx.d.sm.sa().mcast().get(&mgid).unwrap().len(), before - 1);
    receivers.retain(|&g| g != g3);
    assert_eq!(fx.mcast_reach(lid7, mlid), receivers);

    // A port cannot leave for another one without sharing... itself, it can: but not
    // with bits it does not hold.
    let a = fx.ask_as(
        ep6,
        delete(
            mcr::ATTR_ID,
            sm_core::mcast::JOIN_COMPS,
            &join_rec(mgid, g6, JoinState::FULL_MEMBER),
        ),
    );
    assert_eq!(a.status(), sa::ERR_REQ_INVALID);

    // The last full members leave: the group is gone and no switch forwards its MLID.
    for &i in &[0usize, 1, 5] {
        let (ep, g, _) = members[i];
        let a = fx.ask_as(
            ep,
            delete(
                mcr::ATTR_ID,
                sm_core::mcast::JOIN_COMPS,
                &join_rec(mgid, g, JoinState::FULL_MEMBER),
            ),
        );
        assert_eq!(a.status(), MadStatus::OK);
    }
    fx.settle();
    assert!(fx.d.sm.sa().mcast().get(&mgid).is_none());
    let m = fx.d.sim.trace_multicast(lid7, mlid).unwrap();
    assert!(m.reached.is_empty(), "{:?}", m.reached_guids);
    let mfts = fx.ask(table(mft_record::ATTR_ID, 0, &mft_record::Repr::default()));
    assert_eq!(mfts.payload.len(), 0, "no MFT entry left");
    assert!(
        fx.orig.switches().all(|n| fx
            .d
            .sim
            .node(n)
            .switch
            .as_ref()
            .unwrap()
            .info
            .multicast_fdb_top
            == Lid(0xBFFF)),
        "no switch holds a group"
    );
}

#[test]
fn multicast_trees_are_reprogrammed_after_a_link_fails() {
    let fabric = sm_core::generate::generate(&sm_core::generate::GenSpec::FatTree2(
        sm_core::generate::FatTree2::new(8),
    ))
    .unwrap();
    let mut fx = Fixture::up(fabric, Params::default(), SimConfig::default());
    let members = fx.members();
    let bcast = mcr::ipoib_broadcast_mgid(PKey(0xffff), mcr::Scope::LinkLocal);
    let mut joined = Vec::new();
    for &(ep, g, _) in members.iter().step_by(3) {
        let a = fx.ask_as(
            ep,
            set(
                mcr::ATTR_ID,
                sm_core::mcast::JOIN_COMPS,
                &join_rec(bcast, g, JoinState::FULL_MEMBER),
            ),
        );
        assert_eq!(a.status(), MadStatus::OK);
        joined.push(g);
    }
    joined.sort();
    let mlid = fx.d.sm.sa().mcast().get(&bcast).unwrap().mlid;
    fx.settle();
    let src = members[0].2;
    let others: Vec<Guid> = joined
        .iter()
        .copied()
        .filter(|&g| g != members[0].1)
        .collect();
    assert_eq!(fx.mcast_reach(src, mlid), others);

    // Take down an inter-switch link the tree uses: the SM's heavy sweep rebuilds it.
    let m = fx.d.sim.trace_multicast(src, mlid).unwrap();
    assert!(m.links > 0);
    let sw_link = fx
        .orig
        .ports()
        .iter()
        .enumerate()
        .find(|(_, p)| {
            p.remote.is_some_and(|r| {
                fx.orig.node(p.node).kind == NodeKind::Switch
                    && fx.orig.node(fx.orig.port(r).node).kind == NodeKind::Switch
            })
        })
        .map(|(i, _)| PortIdx(i as u32))
        .unwrap();
    fx.d.sim.link_down(sw_link);
    fx.d.run_until(
        60_000_000_000,
        |e| matches!(e, Event::SweepDone(r) if r.subnet_up && r.sweep > 1),
    )
    .expect("a heavy sweep after the trap");
    fx.settle();
    assert_eq!(fx.mcast_reach(src, mlid), others);

    // The link back: the trees that avoid it stay valid, and the repair leaves them.
    fx.d.sim.link_up(sw_link);
    let back =
        fx.d.run_until(60_000_000_000, |e| matches!(e, Event::SweepDone(_)))
            .expect("a repair after the link came back");
    let Event::SweepDone(r) = back else {
        unreachable!()
    };
    assert!(r.subnet_up && !r.heavy, "{r:?}");
    assert_eq!(r.mcast_sets, 0, "trees kept: {r:?}");
    fx.settle();
    assert_eq!(fx.mcast_reach(src, mlid), others);
}

#[test]
fn service_records_register_query_delete_and_expire() {
    let mut fx = Fixture::small();
    let members = fx.members();
    let (ep, g, _) = members[0];
    use service_record::comp;
    let rec = service_record::Repr {
        service_id: service_record::ServiceId(0x1000_0000_0000_0042),
        service_gid: port_gid(g),
        service_p_key: PKey(0xffff),
        service_lease: service_record::Lease(30),
        service_name: service_record::ServiceName::new("storage"),
        ..service_record::Repr::default()
    };
    let mask = comp::SERVICE_ID
        | comp::SERVICE_GID
        | comp::SERVICE_P_KEY
        | comp::SERVICE_LEASE
        | comp::SERVICE_NAME;
    let a = fx.ask_as(ep, set(service_record::ATTR_ID, mask, &rec));
    assert_eq!(a.status(), MadStatus::OK);
    assert_eq!(fx.d.sm.sa().services(), 1);

    // Another port finds it by name.
    let q = service_record::Repr {
        service_name: rec.service_name,
        ..service_record::Repr::default()
    };
    let found = fx.ask(get(service_record::ATTR_ID, comp::SERVICE_NAME, &q));
    assert_eq!(found.status(), MadStatus::OK);
    let r: service_record::Repr = found.records()[0];
    assert_eq!(
        (r.service_id, r.service_gid),
        (rec.service_id, rec.service_gid)
    );

    // Registering without ServiceGID is refused.
    let a = fx.ask_as(ep, set(service_record::ATTR_ID, comp::SERVICE_ID, &rec));
    assert_eq!(a.status(), sa::ERR_REQ_INVALID);

    // Another port may neither delete nor replace it.
    let (other, _, _) = members[1];
    assert_ne!(other, ep);
    let a = fx.ask_as(other, delete(service_record::ATTR_ID, mask, &rec));
    assert_eq!(a.status(), sa::ERR_REQ_DENIED);
    let hijack = service_record::Repr {
        service_name: service_record::ServiceName::new("mine now"),
        ..rec
    };
    let a = fx.ask_as(other, set(service_record::ATTR_ID, mask, &hijack));
    assert_eq!(a.status(), sa::ERR_REQ_DENIED);
    let r: service_record::Repr = fx
        .ask(get(service_record::ATTR_ID, comp::SERVICE_NAME, &q))
        .records()[0];
    assert_eq!(
        r.service_name, rec.service_name,
        "the owner's record stands"
    );

    // Delete, then it is gone; a second delete finds nothing.
    let a = fx.ask_as(ep, delete(service_record::ATTR_ID, mask, &rec));
    assert_eq!(a.status(), MadStatus::OK);
    assert_eq!(fx.d.sm.sa().services(), 0);
    let a = fx.ask_as(ep, delete(service_record::ATTR_ID, mask, &rec));
    assert_eq!(a.status(), sa::ERR_NO_RECORDS);

    // The lease runs out in virtual time.
    let a = fx.ask_as(ep, set(service_record::ATTR_ID, mask, &rec));
    assert_eq!(a.status(), MadStatus::OK);
    fx.run_for(20_000_000_000);
    assert_eq!(fx.d.sm.sa().services(), 1, "the lease has 10 s left");
    fx.run_for(11_000_000_000);
    assert_eq!(fx.d.sm.sa().services(), 0, "the lease ran out");
    let gone = fx.ask(get(service_record::ATTR_ID, comp::SERVICE_NAME, &q));
    assert_eq!(gone.status(), sa::ERR_NO_RECORDS);
}

#[test]
fn subscribers_get_reports_of_traps_until_they_answer() {
    let mut fx = Fixture::small();
    let client_lid = fx.client_lid();
    // Subscribe to trap 128 from every LID.
    let ii = inform_info::Repr {
        lid_range_begin: inform_info::ALL_LIDS,
        is_generic: true,
        subscribe: true,
        r#type: inform_info::NoticeType::All,
        trap_number: notice::trap::LINK_STATE_CHANGE,
        producer_type: 0xFF_FFFF,
        ..inform_info::Repr::default()
    };
    let a = fx.ask(set(inform_info::ATTR_ID, 0, &ii));
    assert_eq!(a.status(), MadStatus::OK);
    assert_eq!(fx.d.sm.sa().subscriptions(), 1);
    let listed = fx.ask(table(
        inform_info_record::ATTR_ID,
        0,
        &inform_info_record::Repr::default(),
    ));
    let recs: Vec<inform_info_record::Repr> = listed.records();
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0].inform_info.trap_number, 128);

    // A link between the switches goes down: its switches trap, the SA reports.
    let f = fx.orig.clone();
    let s1 = node(&f, "Switch1");
    let p3 = f.port_of(s1, 3).unwrap();
    fx.d.sim.link_down(p3);
    let mut reports = Vec::new();
    let deadline = fx.d.now() + 5_000_000_000;
    while fx.d.now() < deadline && reports.is_empty() {
        if !fx.d.step() {
            break;
        }
        while let Some(m) = fx.d.sim.recv(fx.client) {
            let h = sa::Repr::parse(&m.mad).unwrap();
            if h.method == Method::Report {
                reports.push((h, m.mad));
            }
        }
    }
    let (h, mad) = reports.first().cloned().expect("a Report");
    assert_eq!(h.attr_id, sm_mad::attr::NOTICE);
    let n = notice::Repr::parse(&mad[56..]).unwrap();
    assert_eq!(n.trap_number(), Some(notice::trap::LINK_STATE_CHANGE));
    assert!(n.issuer_gid.is_some_and(|g| g != Gid::default()));

    // Unanswered, it comes again; answered, it stops.
    let mut again = None;
    let deadline = fx.d.now() + 5_000_000_000;
    while fx.d.now() < deadline && again.is_none() {
        if !fx.d.step() {
            break;
        }
        while let Some(m) = fx.d.sim.recv(fx.client) {
            let r = sa::Repr::parse(&m.mad).unwrap();
            if r.method == Method::Report {
                again = Some(r);
            }
        }
    }
    let again = again.expect("the Report is sent again");
    assert_eq!(again.attr_id, sm_mad::attr::NOTICE);
    // Answer every Report (both switches of the link trapped): none stays in flight.
    let deadline = fx.d.now() + 10_000_000_000;
    while fx.d.now() < deadline {
        if !fx.d.step() {
            break;
        }
        while let Some(m) = fx.d.sim.recv(fx.client) {
            let mut r = sa::Repr::parse(&m.mad).unwrap();
            if r.method == Method::Report {
                r.method = Method::ReportResp;
                fx.d.sim
                    .send(fx.client, fx.sm_lid, &r.to_bytes().unwrap())
                    .unwrap();
            }
        }
    }
    let st = fx.d.sm.sa().report_stats();
    assert!(st.acked >= 1 && st.resent >= 1, "{st:?}");
    assert_eq!(fx.d.sm.sa().reports_in_flight(), 0, "{st:?}");
    assert_eq!(st.lost, 0, "{st:?}");
    assert!(client_lid.0 != 0);

    // Unsubscribe, naming the QP subscribed from (as with OpenSM).
    let off = inform_info::Repr {
        subscribe: false,
        qpn: 1,
        ..ii
    };
    let wrong_qp = inform_info::Repr { qpn: 7, ..off };
    let a = fx.ask(set(inform_info::ATTR_ID, 0, &wrong_qp));
    assert_eq!(a.status(), sa::ERR_REQ_INVALID);
    let a = fx.ask(set(inform_info::ATTR_ID, 0, &off));
    assert_eq!(a.status(), MadStatus::OK);
    assert_eq!(fx.d.sm.sa().subscriptions(), 0);
}

#[test]
fn a_leave_right_after_its_join_leaves_no_stale_mft_entry() {
    let fabric = sm_core::generate::generate(&sm_core::generate::GenSpec::FatTree2(
        sm_core::generate::FatTree2::new(8),
    ))
    .unwrap();
    let mut fx = Fixture::up(fabric, Params::default(), SimConfig::default());
    let members = fx.members();
    let bcast = mcr::ipoib_broadcast_mgid(PKey(0xffff), mcr::Scope::LinkLocal);
    let (ep_a, g_a, lid_a) = members[0];
    let a = fx.ask_as(
        ep_a,
        set(
            mcr::ATTR_ID,
            sm_core::mcast::JOIN_COMPS,
            &join_rec(bcast, g_a, JoinState::FULL_MEMBER),
        ),
    );
    assert_eq!(a.status(), MadStatus::OK);
    let mlid = fx.d.sm.sa().mcast().get(&bcast).unwrap().mlid;
    fx.settle();
    // A port far from the first joins and leaves at once: the leave reaches the SA while
    // the join's MFT Sets are still on their way.
    let (ep_b, g_b, _) = *members.last().unwrap();
    for (i, method) in [Method::Set, Method::Delete].into_iter().enumerate() {
        let mut r = set(
            mcr::ATTR_ID,
            sm_core::mcast::JOIN_COMPS,
            &join_rec(bcast, g_b, JoinState::FULL_MEMBER),
        );
        r.method = method;
        r.tid = Tid(0x7700 + i as u64);
        fx.d.sim
            .send(ep_b, fx.sm_lid, &r.to_bytes().unwrap())
            .unwrap();
    }
    fx.run_for(100_000_000);
    let mut statuses = Vec::new();
    while let Some(m) = fx.d.sim.recv(ep_b) {
        let h = sa::Repr::parse(&m.mad).unwrap();
        statuses.push((h.method, h.status));
    }
    assert_eq!(
        statuses,
        [
            (Method::GetResp, MadStatus::OK),
            (Method::DeleteResp, MadStatus::OK)
        ]
    );
    assert_eq!(fx.d.sm.sa().mcast().get(&bcast).unwrap().len(), 1);
    let m = fx.d.sim.trace_multicast(lid_a, mlid).unwrap();
    assert!(
        m.reached.is_empty(),
        "the port that left still gets copies: {:?}",
        m.reached_guids
    );
}

#[test]
fn services_and_subscriptions_are_bounded() {
    let params = Params {
        sa: sm_daemon::sa::SaConfig {
            max_entries: 2,
            ..Default::default()
        },
        ..Params::default()
    };
    let mut fx = Fixture::up(small(), params, SimConfig::default());
    let (ep, g, _) = fx.members()[0];
    use service_record::comp;
    let mask = comp::SERVICE_ID | comp::SERVICE_GID;
    let mut statuses = Vec::new();
    for id in 1..=3u64 {
        let rec = service_record::Repr {
            service_id: service_record::ServiceId(id),
            service_gid: port_gid(g),
            ..service_record::Repr::default()
        };
        statuses.push(
            fx.ask_as(ep, set(service_record::ATTR_ID, mask, &rec))
                .status(),
        );
    }
    assert_eq!(
        statuses,
        [MadStatus::OK, MadStatus::OK, sa::ERR_NO_RESOURCES]
    );
    // Replacing a registered service is not a new entry.
    let again = service_record::Repr {
        service_id: service_record::ServiceId(1),
        service_gid: port_gid(g),
        ..service_record::Repr::default()
    };
    assert_eq!(
        fx.ask_as(ep, set(service_record::ATTR_ID, mask, &again))
            .status(),
        MadStatus::OK
    );
    let statuses: Vec<MadStatus> = [128u16, 129, 130]
        .into_iter()
        .map(|trap| {
            let ii = inform_info::Repr {
                lid_range_begin: inform_info::ALL_LIDS,
                is_generic: true,
                subscribe: true,
                r#type: inform_info::NoticeType::All,
                trap_number: trap,
                producer_type: 0xFF_FFFF,
                ..inform_info::Repr::default()
            };
            fx.ask(set(inform_info::ATTR_ID, 0, &ii)).status()
        })
        .collect();
    assert_eq!(
        statuses,
        [MadStatus::OK, MadStatus::OK, sa::ERR_NO_RESOURCES]
    );
    assert_eq!(fx.d.sm.sa().services(), 2);
    assert_eq!(fx.d.sm.sa().subscriptions(), 2);
}

#[test]
fn multicast_trees_converge_under_mad_loss() {
    let fabric = sm_core::generate::generate(&sm_core::generate::GenSpec::FatTree2(
        sm_core::generate::FatTree2::new(8),
    ))
    .unwrap();
    let mut fx = Fixture::up(fabric, Params::default(), SimConfig::default());
    let members = fx.members();
    let bcast = mcr::ipoib_broadcast_mgid(PKey(0xffff), mcr::Scope::LinkLocal);
    for seed_loss in [0.05, 0.1] {
        fx.d.sim.set_faults(sm_sim::Faults {
            loss: seed_loss,
            ..sm_sim::Faults::default()
        });
        // Everyone joins (a lost request or answer is asked again, as clients do).
        for &(ep, g, _) in &members {
            let a = fx.ask_as(
                ep,
                set(
                    mcr::ATTR_ID,
                    sm_core::mcast::JOIN_COMPS,
                    &join_rec(bcast, g, JoinState::FULL_MEMBER),
                ),
            );
            assert_eq!(a.status(), MadStatus::OK);
        }
        // Lost MFT Sets are sent again by the light sweeps (every 10 s).
        fx.run_for(40_000_000_000);
        fx.d.sim.set_faults(sm_sim::Faults::default());
        fx.run_for(11_000_000_000);
        let mut all: Vec<Guid> = members.iter().map(|m| m.1).collect();
        all.sort();
        let mlid = fx.d.sm.sa().mcast().get(&bcast).unwrap().mlid;
        for &(_, g, lid) in &members {
            let others: Vec<Guid> = all.iter().copied().filter(|&x| x != g).collect();
            assert_eq!(fx.mcast_reach(lid, mlid), others, "loss {seed_loss}");
        }
        // Everyone leaves; the tree is gone from every switch.
        fx.d.sim.set_faults(sm_sim::Faults {
            loss: seed_loss,
            ..sm_sim::Faults::default()
        });
        for &(ep, g, _) in &members {
            let a = fx.ask_as(
                ep,
                delete(
                    mcr::ATTR_ID,
                    sm_core::mcast::JOIN_COMPS,
                    &join_rec(bcast, g, JoinState::FULL_MEMBER),
                ),
            );
            // A repeated leave whose first answer was lost finds the port gone.
            assert!(
                a.status() == MadStatus::OK || a.status() == sa::ERR_REQ_INVALID,
                "{:?}",
                a.status()
            );
        }
        fx.run_for(40_000_000_000);
        fx.d.sim.set_faults(sm_sim::Faults::default());
        fx.run_for(11_000_000_000);
        assert!(fx.d.sm.sa().mcast().get(&bcast).unwrap().is_empty());
        let m = fx.d.sim.trace_multicast(members[0].2, mlid).unwrap();
        assert!(
            m.reached.is_empty(),
            "loss {seed_loss}: {:?}",
            m.reached_guids
        );
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 16, ..proptest::prelude::ProptestConfig::default() })]

    /// From random ports: a trap claiming another port's LID, and a delete or replacement
    /// of another port's ServiceRecord. The trap is counted as forged and starts nothing;
    /// the record changes only for a requester with the SM_Key.
    #[test]
    fn forged_traps_and_foreign_service_sets_are_refused(
        owner in 0usize..64,
        attacker in 0usize..64,
        claimed in 0usize..64,
        trap_144 in proptest::prelude::any::<bool>(),
        replace in proptest::prelude::any::<bool>(),
        trusted in proptest::prelude::any::<bool>(),
    ) {
        use service_record::comp;
        use sm_mad::smp::{self, Route};
        let mut fx = Fixture::small();
        let members = fx.members();
        let n = members.len();
        let (o, a, c) = (owner % n, attacker % n, claimed % n);
        proptest::prop_assume!(o != a && c != a);
        let (owner_ep, owner_guid, _) = members[o];
        let (attacker_ep, _, _) = members[a];
        let claimed_lid = members[c].2;
        let rec = service_record::Repr {
            service_id: service_record::ServiceId(0x1000_0000_0000_0099),
            service_gid: port_gid(owner_guid),
            service_p_key: PKey(0xffff),
            service_lease: service_record::Lease(60),
            service_name: service_record::ServiceName::new("owned"),
            ..service_record::Repr::default()
        };
        let mask = comp::SERVICE_ID | comp::SERVICE_GID | comp::SERVICE_P_KEY | comp::SERVICE_LEASE | comp::SERVICE_NAME;
        let ok = fx.ask_as(owner_ep, set(service_record::ATTR_ID, mask, &rec));
        proptest::prop_assert_eq!(ok.status(), MadStatus::OK);

        let mut req = if replace {
            let hijack = service_record::Repr {
                service_name: service_record::ServiceName::new("hijacked"),
                ..rec
            };
            set(service_record::ATTR_ID, mask, &hijack)
        } else {
            delete(service_record::ATTR_ID, mask, &rec)
        };
        if trusted {
            req.sm_key = 1;
        }
        let answer = fx.ask_as(attacker_ep, req);
        let q = service_record::Repr {
            service_id: rec.service_id,
            ..service_record::Repr::default()
        };
        let now = fx.ask(get(service_record::ATTR_ID, comp::SERVICE_ID, &q));
        if trusted {
            proptest::prop_assert_eq!(answer.status(), MadStatus::OK);
        } else {
            proptest::prop_assert_eq!(answer.status(), sa::ERR_REQ_DENIED);
            let r: service_record::Repr = now.records()[0];
            proptest::prop_assert_eq!(r.service_name, rec.service_name, "the owner's record stands");
        }

        // A trap in another port's name.
        let (before_muted, before_forged) = fx.d.sm.traps_ignored();
        let kind = if trap_144 {
            notice::Trap::LocalChanges(notice::details_144::Repr {
                lid_addr: claimed_lid,
                capability_mask: sm_mad::port_info::cap::IS_SM,
                ..Default::default()
            })
        } else {
            notice::Trap::LinkStateChange(notice::details_128::Repr { lid_addr: claimed_lid })
        };
        let notice = notice::Repr::generic(notice::ProducerType::Ca, claimed_lid, kind);
        let mut trap = smp::Repr::request(Method::Trap, Tid(0x99), sm_mad::attr::NOTICE, 0, Route::Lid);
        trap.set_attribute(&notice).unwrap();
        let sm_lid = fx.sm_lid;
        fx.d.sim.send(attacker_ep, sm_lid, &trap.to_bytes().unwrap()).unwrap();
        let started = fx.d.run_until(50_000_000, |e| matches!(e, Event::SweepStarted { .. }));
        proptest::prop_assert!(started.is_none(), "a forged trap started a sweep: {:?}", started);
        proptest::prop_assert_eq!(fx.d.sm.traps_ignored(), (before_muted, before_forged + 1));
    }
}
