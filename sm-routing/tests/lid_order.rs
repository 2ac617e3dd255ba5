//! The balance of the tables does not depend on how LIDs are numbered nor on where the SM
//! sits: a fat-tree numbered in order, in reverse, shuffled or with the SM's port first,
//! with LMC 0 to 2 and the SM's LID given to the engine, routes to the same max link load
//! under all-to-all traffic and the same worst shift permutation as the plain numbering.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use sm_core::NodeKind;
use sm_core::fabric::{Fabric, PortIdx};
use sm_core::generate::{FatTree2, FatTree3, GenSpec, Ratio, SplitMix64, generate};
use sm_core::lid::LidStore;
use sm_mad::Lid;
use sm_routing::{MetricsOptions, Options, Topo, metrics, route_chain};

/// Max switch-to-switch link load under all-to-all, worst shift permutation load.
type Balance = (u64, u32);

/// Every end port that gets a LID, in fabric order.
fn lid_ports(f: &Fabric) -> Vec<PortIdx> {
    f.end_ports()
        .filter(|&p| {
            let port = f.port(p);
            port.remote.is_some() || f.node(port.node).kind == NodeKind::Switch
        })
        .collect()
}

/// Numbers the ports in `order` from LID 1 up, each CA range aligned to its 2^LMC.
fn number(f: &mut Fabric, order: &[PortIdx], lmc: u8) {
    let mut next = 1u32;
    for &p in order {
        let lmc = if f.node(f.port(p).node).kind == NodeKind::Switch {
            0
        } else {
            lmc
        };
        let size = 1u32 << lmc;
        let base = next.div_ceil(size) * size;
        let port = f.port_mut(p);
        port.lid = Lid(base as u16);
        port.lmc = lmc;
        next = base + size;
    }
}

/// The balance of `engine`'s tables, told the LID of the SM on port `sm`.
fn balance(f: &Fabric, engine: &str, sm: Option<PortIdx>) -> Balance {
    let topo = Topo::new(f).unwrap();
    let opts = Options {
        sm_lid: sm.map(|p| f.port(p).lid),
        ..Options::default()
    };
    let r = route_chain(engine, &topo, &opts).unwrap().routes;
    let m = metrics(
        &topo,
        &r,
        &MetricsOptions {
            bisections: 0,
            diversity: false,
            ..MetricsOptions::default()
        },
    );
    assert_eq!(m.all_to_all.unrouted_flows, 0, "{engine}");
    (m.all_to_all.switch_links.max, m.shifts.worst_max_load)
}

fn shuffled(ports: &[PortIdx], seed: u64) -> Vec<PortIdx> {
    let mut v = ports.to_vec();
    let mut rng = SplitMix64::new(seed);
    for i in (1..v.len()).rev() {
        v.swap(i, rng.below(i as u64 + 1) as usize);
    }
    v
}

fn sm_first(ports: &[PortIdx], sm: PortIdx) -> Vec<PortIdx> {
    let mut v = vec![sm];
    v.extend(ports.iter().copied().filter(|&p| p != sm));
    v
}

/// The fat-trees: full 2- and 3-level, dual-ported hosts, oversubscribed, a few pods.
fn trees() -> Vec<(&'static str, GenSpec)> {
    vec![
        ("ft2 radix 8", GenSpec::FatTree2(FatTree2::new(8))),
        ("ft2 radix 12", GenSpec::FatTree2(FatTree2::new(12))),
        ("ft3 radix 8", GenSpec::FatTree3(FatTree3::new(8))),
        (
            "ft2 radix 12, 2 ports per CA",
            GenSpec::FatTree2(FatTree2 {
                ca_ports: 2,
                ..FatTree2::new(12)
            }),
        ),
        (
            "ft2 radix 12, 2:1",
            GenSpec::FatTree2(FatTree2 {
                oversubscription: Some(Ratio { down: 2, up: 1 }),
                ..FatTree2::new(12)
            }),
        ),
        (
            "ft3 radix 8, 3 pods",
            GenSpec::FatTree3(FatTree3 {
                pods: Some(3),
                ..FatTree3::new(8)
            }),
        ),
    ]
}

/// A tree with LIDs numbered in fabric order.
fn numbered(spec: &GenSpec, lmc: u8) -> Fabric {
    let mut f = generate(spec).unwrap();
    LidStore::new().assign(&mut f, lmc).unwrap();
    f
}

#[test]
fn fat_tree_balance_does_not_depend_on_lid_order_or_the_sms_port() {
    for (name, spec) in trees() {
        for lmc in 0..=2 {
            let f = numbered(&spec, lmc);
            let ports = lid_ports(&f);
            let cas: Vec<PortIdx> = ports
                .iter()
                .copied()
                .filter(|&p| f.node(f.port(p).node).kind == NodeKind::Ca)
                .collect();
            let switch = ports
                .iter()
                .copied()
                .find(|&p| f.node(f.port(p).node).kind == NodeKind::Switch)
                .unwrap();
            // The SM on the first, a middle and the last host, and on a switch.
            let sms = [cas[0], cas[cas.len() / 2], cas[cas.len() - 1], switch];
            let mut reversed = ports.clone();
            reversed.reverse();
            let mut orders = vec![
                ("reversed", reversed, None),
                ("shuffled", shuffled(&ports, 7), None),
                ("shuffled", shuffled(&ports, 8), Some(sms[1])),
            ];
            for sm in sms {
                orders.push(("in order", ports.clone(), Some(sm)));
                orders.push(("SM first", sm_first(&ports, sm), Some(sm)));
            }
            for engine in ["ftree", "auto"] {
                let want = balance(&f, engine, None);
                for (what, order, sm) in &orders {
                    let mut g = f.clone();
                    number(&mut g, order, lmc);
                    assert_eq!(
                        balance(&g, engine, *sm),
                        want,
                        "{engine} on {name}, LMC {lmc}, LIDs {what}, SM on {:?}",
                        sm.map(|p| g.port(p).guid)
                    );
                }
            }
        }
    }
}

/// minhop and updn balance in their destinations' order, not their LIDs': the SM's port
/// and the numbering change nothing either.
#[test]
fn minhop_and_updn_balance_does_not_depend_on_lid_order_or_the_sms_port() {
    for (name, spec) in trees().into_iter().take(2) {
        for lmc in 0..=2 {
            let f = numbered(&spec, lmc);
            let ports = lid_ports(&f);
            let sm = ports
                .iter()
                .copied()
                .find(|&p| f.node(f.port(p).node).kind == NodeKind::Ca)
                .unwrap();
            for engine in ["minhop", "updn"] {
                let want = balance(&f, engine, None);
                for order in [shuffled(&ports, 3), sm_first(&ports, sm)] {
                    let mut g = f.clone();
                    number(&mut g, &order, lmc);
                    assert_eq!(balance(&g, engine, Some(sm)), want, "{engine} on {name}");
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Any numbering, any SM port.
    #[test]
    fn any_numbering_and_sm_port_keep_the_ftree_balance(
        tree in 0usize..3,
        lmc in 0u8..=2,
        seed in any::<u64>(),
        sm in any::<prop::sample::Index>(),
    ) {
        let (name, spec) = trees().swap_remove(tree);
        let f = numbered(&spec, lmc);
        let ports = lid_ports(&f);
        let sm = *sm.get(&ports);
        let want = balance(&f, "ftree", None);
        let mut g = f.clone();
        number(&mut g, &shuffled(&ports, seed), lmc);
        prop_assert_eq!(balance(&g, "ftree", Some(sm)), want, "{}", name);
    }
}
