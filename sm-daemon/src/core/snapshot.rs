//! The SA's snapshot of the subnet, made from the model and the plan at the end of a
//! heavy sweep's programming: the plan's topology and tables, and every attribute as the
//! nodes last reported it.

use sm_mad::sm_info::SmState;
use sm_mad::{attr, sl2vl, vl_arb};

use super::Params;
use super::model::Discovered;
use super::plan::Plan;
use crate::sa;

/// The SA database for `m` programmed after `plan`; `remote_sms` as the election knows them.
pub(super) fn build(
    m: &Discovered,
    plan: &Plan,
    p: &Params,
    remote_sms: Vec<(sm_mad::Lid, sm_mad::sm_info::Repr)>,
) -> sa::Db {
    let f = &plan.fabric;
    let params = sa::DbParams {
        subnet_prefix: p.subnet_prefix,
        sm_port_guid: f.port(m.own).guid,
        sm_lid: plan.lid_of(m.own),
        sm_priority: p.sm_priority,
        sm_state: SmState::Master,
        subnet_timeout: p.subnet_timeout,
        lmc: p.lmc,
        qos: p.qos.enabled,
    };
    let mut db = sa::Db::build(f, &plan.to_lfts(), &plan.pkeys, params);
    db.set_remote_sms(remote_sms);
    for (n, facts) in m.nodes.iter_enumerated() {
        db.set_node_info(n, facts.info, &f.node(n).description);
        if let Some(si) = facts.switch_info {
            db.set_switch_info(n, si);
        }
    }
    for (q, facts) in m.ports.iter_enumerated() {
        if let Some(pi) = facts.info {
            db.set_port_info(q, pi);
        }
    }
    for tb in &plan.tables {
        let is_switch = m.is_switch(f.port(tb.port).node);
        match tb.attr {
            attr::SL_TO_VL_MAPPING_TABLE => {
                let inp = if is_switch {
                    (tb.modifier >> 8) as u8
                } else {
                    0
                };
                if let Ok(t) = sl2vl::Repr::parse(&tb.data) {
                    db.set_sl2vl(tb.port, inp, t);
                }
            }
            attr::VL_ARBITRATION_TABLE => {
                if let Ok(t) = vl_arb::Repr::parse(&tb.data) {
                    db.set_vlarb(tb.port, (tb.modifier >> 16) as u8, t);
                }
            }
            _ => {}
        }
    }
    for part in &p.partitions.partitions {
        db.set_partition_sl(part.pkey, part.effective_sl(p.qos.enabled).0);
    }
    db.finish()
}
