//! Port health: a link that keeps going down is taken out of the subnet.
//!
//! Every link a repair finds down counts as a flap of both its ports. A port with
//! `link_flaps` flaps within `flap_window` is **unhealthy**: the SM leaves its link out of
//! the model (so it is not routed over and not brought to ACTIVE; the port stays in INIT),
//! and later traps about it change nothing, so a flapping cable costs a look, never a heavy
//! sweep or a reroute. The list is the daemon's to persist ([`super::Event::HealthChanged`])
//! and an admin's to clear ([`super::Sm::clear_unhealthy`]).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::Duration;

use sm_mad::Guid;

use super::Instant;

/// When a port is unhealthy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HealthConfig {
    /// Flaps within `flap_window` that make a port unhealthy; 0 never does.
    pub link_flaps: u32,
    pub flap_window: Duration,
    /// Switch an unhealthy link off on its switch end (PortPhysicalState Disabled).
    pub disable_ports: bool,
    /// Traps an issuer may send at once before it is muted (0: never muted).
    pub trap_burst: u32,
    /// Traps per second an issuer may keep sending (0: never muted).
    pub trap_rate: f64,
}

impl Default for HealthConfig {
    fn default() -> Self {
        HealthConfig {
            link_flaps: 5,
            flap_window: Duration::from_secs(60),
            disable_ports: false,
            trap_burst: 50,
            trap_rate: 10.0,
        }
    }
}

/// A port taken out of the subnet, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct UnhealthyPort {
    /// The node's GUID.
    pub node: Guid,
    pub port: u8,
    pub reason: String,
}

/// Flaps seen and ports found unhealthy.
#[derive(Debug, Default)]
pub(super) struct Health {
    cfg: HealthConfig,
    flaps: HashMap<(Guid, u8), VecDeque<Instant>>,
    unhealthy: BTreeMap<(Guid, u8), String>,
    /// Ports the SM switched off, each with the other end of its link.
    disabled: BTreeMap<(Guid, u8), (Guid, u8)>,
}

impl Health {
    pub(super) fn new(cfg: HealthConfig, known: &[UnhealthyPort]) -> Health {
        Health {
            cfg,
            flaps: HashMap::new(),
            unhealthy: known
                .iter()
                .map(|u| ((u.node, u.port), u.reason.clone()))
                .collect(),
            disabled: BTreeMap::new(),
        }
    }

    pub(super) fn set_config(&mut self, cfg: HealthConfig) {
        self.cfg = cfg;
    }

    pub(super) fn is_unhealthy(&self, node: Guid, port: u8) -> bool {
        self.unhealthy.contains_key(&(node, port))
    }

    pub(super) fn is_empty(&self) -> bool {
        self.unhealthy.is_empty()
    }

    /// The link between these ports went down; true when that made them unhealthy.
    pub(super) fn link_down(&mut self, now: Instant, a: (Guid, u8), b: (Guid, u8)) -> bool {
        if self.cfg.link_flaps == 0 || self.is_unhealthy(a.0, a.1) || self.is_unhealthy(b.0, b.1) {
            return false;
        }
        let window = self.cfg.flap_window;
        let mut worst = 0;
        for p in [a, b] {
            let seen = self.flaps.entry(p).or_default();
            seen.push_back(now);
            while seen.front().is_some_and(|&t| now - t > window) {
                seen.pop_front();
            }
            worst = worst.max(seen.len());
        }
        if (worst as u32) < self.cfg.link_flaps {
            return false;
        }
        let reason = format!(
            "link to {}[{}] went down {worst} times within {} s",
            b.0,
            b.1,
            window.as_secs()
        );
        let back = format!(
            "link to {}[{}] went down {worst} times within {} s",
            a.0,
            a.1,
            window.as_secs()
        );
        for (p, why) in [(a, reason), (b, back)] {
            tracing::warn!(node = %p.0, port = p.1, "unhealthy: {why}; taken out of the subnet");
            self.flaps.remove(&p);
            self.unhealthy.insert(p, why);
        }
        true
    }

    /// Marks a port unhealthy for `reason` (from outside: its error counters); true when
    /// it was not already.
    pub(super) fn mark(&mut self, node: Guid, port: u8, reason: String) -> bool {
        if self.is_unhealthy(node, port) {
            return false;
        }
        tracing::warn!(%node, port, "unhealthy: {reason}; taken out of the subnet");
        self.flaps.remove(&(node, port));
        self.unhealthy.insert((node, port), reason);
        true
    }

    /// Takes a port back in; true when it was unhealthy.
    pub(super) fn clear(&mut self, node: Guid, port: u8) -> bool {
        self.flaps.remove(&(node, port));
        self.unhealthy.remove(&(node, port)).is_some()
    }

    pub(super) fn disables(&self) -> bool {
        self.cfg.disable_ports
    }

    pub(super) fn is_disabled(&self, p: (Guid, u8)) -> bool {
        self.disabled.contains_key(&p)
    }

    pub(super) fn forget_disabled(&mut self, p: (Guid, u8)) {
        self.disabled.remove(&p);
    }

    /// The SM switched `p` off; `peer` is the other end of its link.
    pub(super) fn note_disabled(&mut self, p: (Guid, u8), peer: (Guid, u8)) {
        self.disabled.insert(p, peer);
    }

    /// Ports the SM switched off whose link is no longer unhealthy at either end: to be
    /// switched on again (taken off the list).
    pub(super) fn take_enabled(&mut self) -> Vec<(Guid, u8)> {
        let back: Vec<(Guid, u8)> = self
            .disabled
            .iter()
            .filter(|(p, peer)| {
                !self.unhealthy.contains_key(p) && !self.unhealthy.contains_key(peer)
            })
            .map(|(p, _)| *p)
            .collect();
        for p in &back {
            self.disabled.remove(p);
        }
        back
    }

    pub(super) fn list(&self) -> Vec<UnhealthyPort> {
        self.unhealthy
            .iter()
            .map(|(&(node, port), reason)| UnhealthyPort {
                node,
                port,
                reason: reason.clone(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }

    #[test]
    fn flaps_within_the_window_make_both_ends_unhealthy() {
        let mut h = Health::new(
            HealthConfig {
                link_flaps: 3,
                flap_window: Duration::from_secs(10),
                ..HealthConfig::default()
            },
            &[],
        );
        let (a, b) = ((Guid(1), 3), (Guid(2), 7));
        assert!(!h.link_down(at(0), a, b));
        assert!(!h.link_down(at(6_000), a, b));
        // The first flap left the window.
        assert!(!h.link_down(at(12_000), a, b));
        assert!(h.list().is_empty());
        assert!(h.link_down(at(14_000), a, b));
        assert!(h.is_unhealthy(Guid(1), 3) && h.is_unhealthy(Guid(2), 7));
        let l = h.list();
        assert_eq!(l.len(), 2);
        assert!(l[0].reason.contains("3 times within 10 s"), "{l:?}");
        // Once unhealthy, more flaps change nothing.
        assert!(!h.link_down(at(15_000), a, b));
        assert!(h.clear(Guid(1), 3));
        assert!(!h.clear(Guid(1), 3));
        assert!(h.is_unhealthy(Guid(2), 7));
    }

    #[test]
    fn zero_flaps_turns_it_off_and_known_ports_start_unhealthy() {
        let known = [UnhealthyPort {
            node: Guid(9),
            port: 1,
            reason: "persisted".into(),
        }];
        let mut h = Health::new(
            HealthConfig {
                link_flaps: 0,
                flap_window: Duration::from_secs(10),
                ..HealthConfig::default()
            },
            &known,
        );
        assert!(h.is_unhealthy(Guid(9), 1));
        for i in 0..100 {
            assert!(!h.link_down(at(i), (Guid(1), 1), (Guid(2), 2)));
        }
    }
}
