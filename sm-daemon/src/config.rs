//! From the TOML configuration to the core's parameters.

use std::path::Path;

use sm_core::config::Config;

use crate::core::Params;

/// Why a configuration cannot run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ParamsError {
    #[error(transparent)]
    Partitions(#[from] sm_core::partitions::PartitionError),
    #[error("routing engine \"{0}\" is not built (known: minhop, updn, ftree)")]
    Engine(String),
}

/// The core's parameters for a configuration read from `path`.
pub fn params(cfg: &Config, path: &Path) -> Result<Params, ParamsError> {
    for e in &cfg.routing.engines {
        if sm_routing::engine(e).is_err() {
            return Err(ParamsError::Engine(e.clone()));
        }
    }
    let sm = &cfg.sm;
    let ms = |v: u64| v.saturating_mul(1_000_000);
    Ok(Params {
        lmc: sm.lmc,
        routing: cfg.routing.engines.join(","),
        routing_options: sm_routing::Options {
            adaptive: cfg.routing.adaptive,
            ..sm_routing::Options::default()
        },
        smp_timeout: ms(sm.smp_timeout_ms as u64),
        smp_retries: sm.smp_retries,
        max_outstanding: sm.max_outstanding_smps as usize,
        sweep_interval: ms(sm.sweep_interval_ms),
        sm_key: sm.sm_key,
        poll_interval: ms(u64::from(sm.sm_poll_interval_ms)),
        poll_retries: sm.sm_poll_retries,
        subnet_prefix: sm.subnet_prefix,
        m_key: sm.m_key,
        m_key_protect_bits: sm.m_key_protect_bits,
        m_key_lease_period: sm.m_key_lease_period,
        force_link_speed: sm.force_link_speed,
        sm_priority: sm.sm_priority,
        max_op_vls: sm.max_op_vls,
        subnet_timeout: sm.subnet_timeout,
        switch_life_time: sm.packet_life_time,
        hoq_life: sm.head_of_queue_lifetime,
        leaf_hoq_life: sm.leaf_head_of_queue_lifetime,
        partitions: cfg.partitions.load(path)?,
        pkey_options: cfg.partitions.table_options(),
        qos: cfg.qos.clone(),
        // OpenSM's sa_key defaults to its sm_key: the SA trusts requesters presenting it.
        sa: crate::sa::SaConfig {
            sa_key: sm.sm_key,
            ..crate::sa::SaConfig::default()
        },
        ..Params::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sa_trusts_the_sm_key() {
        let mut cfg = Config::default();
        cfg.sm.sm_key = 0x77;
        let p = params(&cfg, Path::new("<test>")).unwrap();
        assert_eq!(p.sa.sa_key, 0x77);
        assert_eq!(p.sa.rmpp, crate::sa::RmppMode::Segment);
    }

    #[test]
    fn m_key_and_link_speed_reach_the_core() {
        let d = params(&Config::default(), Path::new("<test>")).unwrap();
        assert_eq!(
            (d.m_key_protect_bits, d.m_key_lease_period, d.force_link_speed),
            (0, 0, 15)
        );
        let mut cfg = Config::default();
        cfg.sm.m_key_protect_bits = 2;
        cfg.sm.m_key_lease_period = 60;
        cfg.sm.force_link_speed = 3;
        let p = params(&cfg, Path::new("<test>")).unwrap();
        assert_eq!(
            (p.m_key_protect_bits, p.m_key_lease_period, p.force_link_speed),
            (2, 60, 3)
        );
    }
}
