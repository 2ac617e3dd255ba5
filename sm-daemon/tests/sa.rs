//! The SA server against the simulated fabric, in virtual time: the SM brings a fabric up,
//! a second endpoint on another CA port acts as the SA client (sending requests, acking RMPP
//! segments with the sm-mad `RmppReceiver`), and every answer is checked against the fabric.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use sm_core::fabric::{Fabric, NodeKind, PortIdx};
use sm_core::fabric::{NodeIdx, Speed};
use sm_core::lid::LidStore;
use sm_core::partitions::Partitions;
use sm_core::qos::QosOptions;
use sm_core::read_topology_str;
use sm_daemon::core::{Event, Params};
use sm_daemon::transport::sim::SimDriver;
use sm_mad::link::{Mtu, Rate};
use sm_mad::path_record::{self, Selector};
use sm_mad::port_info::link_width;
use sm_mad::rmpp::{self, ReceiverState, RmppReceiver, RmppSender, Segmenter, SenderConfig};
use sm_mad::{
    Gid, Guid, Lid, MadStatus, Method, PKey, Sl, Tid, Wire, class_port_info, guid_info_record,
    lft_record, link_record, mft_record, multipath_record, node_info, node_record,
    pkey_table_record, port_info, port_info_record, sa, sl2vl_record, sm_info_record,
    switch_info_record, vl_arb_record,
};
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
    fx.d.sm.handle_mad(fx.d.now(), fx.client_lid(), &b);
    let t = fx.d.sm.poll_transmit().expect("an answer");
    assert_eq!(t.dlid, fx.client_lid());
    assert_eq!(t.gsi.unwrap().lid, fx.client_lid());
    assert_eq!(t.mad.len(), 256);
    assert_eq!((t.mad[2], t.mad[3]), (1, 0x81));
    assert_eq!(
        u16::from_be_bytes([t.mad[4], t.mad[5]]),
        MadStatus::BAD_VERSION.0
    );
    // PathRecord without a destination; half a ServiceID.
    use path_record::comp;
    assert_eq!(
        status_of(
            &mut fx,
            get(path_record::ATTR_ID, comp::SLID, &pr_query(hca, Lid(0)))
        ),
        sa::ERR_REQ_INSUFFICIENT_COMPONENTS
    );
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
    fx.d.sm.handle_mad(fx.d.now(), fx.client_lid(), &short);
    let stats = fx.d.sm.sa().stats();
    assert!(stats.errors >= 14, "{stats:?}");
}
