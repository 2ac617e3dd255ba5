//! The SA's snapshot of the subnet: the model and the plan of the sweep that just
//! programmed it, shared with the SA (not copied), with the subnet-wide facts records need.

use std::sync::Arc;

use sm_mad::sm_info::SmState;

use super::Params;
use super::model::Discovered;
use super::plan::Plan;
use crate::sa;

/// The SA database for `m` programmed after `plan`; `remote_sms` as the election knows them.
pub(super) fn build(
    m: &Arc<Discovered>,
    plan: &Arc<Plan>,
    p: &Params,
    remote_sms: Vec<(sm_mad::Lid, sm_mad::sm_info::Repr)>,
) -> sa::Db {
    let params = sa::DbParams {
        subnet_prefix: p.subnet_prefix,
        sm_port_guid: plan.fabric.port(m.own).guid,
        sm_lid: plan.lid_of(m.own),
        sm_priority: p.sm_priority,
        sm_state: SmState::Master,
        subnet_timeout: p.subnet_timeout,
        lmc: p.lmc,
        qos: p.qos.enabled,
    };
    let mut db = sa::Db::new(Arc::clone(m), Arc::clone(plan), params);
    db.set_remote_sms(remote_sms);
    for part in &p.partitions.partitions {
        db.set_partition_sl(part.pkey, part.effective_sl(p.qos.enabled).0);
    }
    db
}
