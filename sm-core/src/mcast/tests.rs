use std::path::Path;

use super::*;
use sm_mad::mcmember_record::ipoib_broadcast_mgid;

const PREFIX: u64 = 0xfe80_0000_0000_0000;
const A: Guid = Guid(0xa1);
const B: Guid = Guid(0xb1);
const C: Guid = Guid(0xc1);
/// Limited member of the default partition only.
const L: Guid = Guid(0xd1);
/// Slow port: 1024-byte MTU, 10 Gb/s.
const S: Guid = Guid(0xe1);
/// Middle port: 2048-byte MTU, 40 Gb/s.
const M: Guid = Guid(0xf1);

fn ports() -> PortTable {
    let mut t = PortTable::new();
    let full = vec![PKey(0xffff), PKey(0x8002)];
    t.insert(A, Mtu::Mtu4096, Rate::Gbps100, full.clone());
    t.insert(B, Mtu::Mtu4096, Rate::Gbps100, full.clone());
    t.insert(C, Mtu::Mtu4096, Rate::Gbps100, vec![PKey(0xffff)]);
    t.insert(L, Mtu::Mtu4096, Rate::Gbps100, vec![PKey(0x7fff)]);
    t.insert(M, Mtu::Mtu2048, Rate::Gbps40, full.clone());
    t.insert(S, Mtu::Mtu1024, Rate::Gbps10, full);
    t
}

fn bcast() -> Gid {
    ipoib_broadcast_mgid(PKey(0x7fff), Scope::LinkLocal)
}

/// A create-capable join of `port` for `mgid`.
fn create(mgid: Gid, port: Guid, js: JoinState) -> McRequest {
    McRequest {
        record: mcr::Repr {
            mgid,
            port_gid: Gid::new(PREFIX, port),
            q_key: 0x0b1b,
            p_key: PKey(0xffff),
            sl: Sl(0),
            tclass: 0,
            flow_label: 0,
            join_state: js,
            ..mcr::Repr::default()
        },
        comp_mask: CREATE_COMPS,
        requester: port,
    }
}

/// A plain join (MGID, PortGID, JoinState).
fn join(mgid: Gid, port: Guid, js: JoinState) -> McRequest {
    McRequest {
        comp_mask: JOIN_COMPS,
        ..create(mgid, port, js)
    }
}

fn reg() -> McRegistry {
    McRegistry::new(McConfig::default())
}

const FULL: JoinState = JoinState::FULL_MEMBER;
const NON: JoinState = JoinState::NON_MEMBER;
const SON: JoinState = JoinState::SEND_ONLY_NON_MEMBER;
const SOF: JoinState = JoinState::SEND_ONLY_FULL_MEMBER;

#[test]
fn mlid_pool_takes_the_lowest_free_and_reuses() {
    let g = |i: u8| Gid([i; 16]);
    let mut p = MlidPool::new(3);
    assert_eq!(p.alloc(g(1)), Some(Lid(0xc000)));
    assert_eq!(p.alloc(g(2)), Some(Lid(0xc001)));
    assert_eq!(p.alloc(g(3)), Some(Lid(0xc002)));
    assert_eq!(p.alloc(g(4)), None);
    assert_eq!(p.in_use(), 3);
    assert!(p.free(Lid(0xc001)));
    assert!(!p.free(Lid(0xc001)));
    assert!(!p.free(Lid(0x0001)) && !p.free(Lid(0xffff)));
    assert_eq!(p.owner(Lid(0xc001)), None);
    assert_eq!(p.alloc(g(5)), Some(Lid(0xc001)));
    assert_eq!(p.owner(Lid(0xc001)), Some(g(5)));
    assert_eq!(p.top(), Some(Lid(0xc002)));
    // Exact requests: free and within the capacity only.
    assert!(!p.alloc_exact(Lid(0xc000), g(6)));
    assert!(!p.alloc_exact(Lid(0xc003), g(6)));
    assert!(!p.alloc_exact(Lid(0x10), g(6)));
    assert!(p.free(Lid(0xc002)));
    assert_eq!(p.top(), Some(Lid(0xc001)));
    assert!(p.alloc_exact(Lid(0xc002), g(6)));
    // Shrinking keeps what is in use and reports it.
    p.set_capacity(1);
    assert_eq!(p.beyond_capacity(), vec![Lid(0xc001), Lid(0xc002)]);
    assert_eq!(p.alloc(g(7)), None);
    p.set_capacity(u16::MAX);
    assert_eq!(p.capacity(), MAX_MLIDS);
    assert_eq!(p.alloc(g(7)), Some(Lid(0xc003)));
    assert_eq!(MlidPool::new(0).alloc(g(1)), None);
    assert!(MlidPool::new(MAX_MLIDS).alloc_exact(Lid(0xfffe), g(1)));
    assert!(!MlidPool::new(MAX_MLIDS).alloc_exact(Lid(0xffff), g(1)));
}

#[test]
fn a_join_with_the_create_components_creates_the_group() {
    let mut r = reg();
    let t = ports();
    let out = r.join(&t, &create(bcast(), A, FULL)).unwrap();
    assert!(out.created && out.reroute);
    assert_eq!(out.mlid, Lid(0xc000));
    assert_eq!(out.notice, Some(McNotice::Created(bcast())));
    let g = r.get(&bcast()).unwrap();
    // MTU and rate are the creator's port's when not asked for.
    assert_eq!((g.mtu, g.rate), (Mtu::Mtu4096, Rate::Gbps100));
    assert_eq!(g.scope, Scope::LinkLocal);
    assert_eq!(g.packet_life_time, 18);
    assert!(!g.well_known);
    assert_eq!(g.member(A).unwrap().join_state, FULL);
    assert!(!g.member(A).unwrap().proxy);
    // The answer: the group's parameters, selectors exact, the port's JoinState.
    let rec = out.record;
    assert_eq!(rec.mlid, Lid(0xc000));
    assert_eq!(rec.mtu_selector, Selector::Exactly);
    assert_eq!(rec.rate, Rate::Gbps100);
    assert_eq!(rec.join_state, FULL);
    assert_eq!(rec.port_gid, Gid::new(PREFIX, A));
    assert_eq!(r.by_mlid(Lid(0xc000)).unwrap().mgid, bcast());
}

#[test]
fn joins_or_their_join_states() {
    let mut r = reg();
    let t = ports();
    r.join(&t, &create(bcast(), A, FULL)).unwrap();
    let out = r.join(&t, &join(bcast(), B, SON)).unwrap();
    assert!(!out.created && out.reroute && out.notice.is_none());
    // Adding NonMember to a send-only port makes it receive: the tree changes.
    let out = r.join(&t, &join(bcast(), B, NON)).unwrap();
    assert!(out.reroute);
    assert_eq!(out.record.join_state, JoinState(SON.0 | NON.0));
    // Adding FullMember to a receiving port changes nothing the tree sees.
    let out = r.join(&t, &join(bcast(), B, FULL)).unwrap();
    assert!(!out.reroute);
    assert_eq!(out.record.join_state, JoinState(0b0111));
    assert_eq!(r.get(&bcast()).unwrap().full_members(), 2);
    assert_eq!(
        r.get(&bcast()).unwrap().tree_members(),
        vec![(A, FULL), (B, JoinState(0b0111))]
    );
}

#[test]
fn create_rules() {
    let t = ports();
    let mgid = Gid([0xff, 0x15, 0x12, 0x34, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7]);
    // Only a full bit creates.
    for js in [NON, SON, JoinState(0)] {
        let e = reg().join(&t, &create(mgid, A, js)).unwrap_err();
        assert!(matches!(e, McError::CreateNeedsFullMember(_)), "{e}");
        assert_eq!(e.sa_status(), SaStatus::ReqInvalid);
    }
    // A send-only full member creates.
    assert!(reg().join(&t, &create(mgid, A, SOF)).unwrap().created);
    // Every create component is needed.
    for missing in [
        comp::Q_KEY,
        comp::TCLASS,
        comp::P_KEY,
        comp::FLOW_LABEL,
        comp::SL,
    ] {
        let mut q = create(mgid, A, FULL);
        q.comp_mask &= !missing;
        let e = reg().join(&t, &q).unwrap_err();
        assert_eq!(
            e,
            McError::InsufficientComponents {
                got: q.comp_mask,
                missing
            }
        );
        assert_eq!(e.sa_status(), SaStatus::ReqInsufficientComponents);
    }
    // A join without the three join components is refused before anything else.
    let mut q = join(mgid, A, FULL);
    q.comp_mask = comp::MGID | comp::JOIN_STATE;
    assert_eq!(
        reg().join(&t, &q).unwrap_err().sa_status(),
        SaStatus::ReqInsufficientComponents
    );
    // Bad MGIDs.
    let mut bad = mgid;
    bad.0[0] = 0xfe;
    assert!(matches!(
        reg().join(&t, &create(bad, A, FULL)),
        Err(McError::BadMgid { .. })
    ));
    let mut bad = mgid;
    bad.0[1] = 0x35; // a reserved flag bit
    assert!(matches!(
        reg().join(&t, &create(bad, A, FULL)),
        Err(McError::BadMgid { .. })
    ));
    let mut bad = mgid;
    bad.0[1..4].copy_from_slice(&[0x12, 0xa0, 0x1b]); // the SA's signature, link-local
    assert!(matches!(
        reg().join(&t, &create(bad, A, FULL)),
        Err(McError::BadMgid { .. })
    ));
    bad.0[1] = 0x15; // site-local is fine
    assert!(reg().join(&t, &create(bad, A, FULL)).is_ok());
    // An invalid P_Key.
    let mut q = create(mgid, A, FULL);
    q.record.p_key = PKey(0x8000);
    assert_eq!(
        reg().join(&t, &q).unwrap_err(),
        McError::InvalidPKey(PKey(0x8000))
    );
    // A foreign subnet prefix.
    let mut q = create(mgid, A, FULL);
    q.record.port_gid = Gid::new(0xfec0_0000_0000_0001, A);
    let e = reg().join(&t, &q).unwrap_err();
    assert_eq!(e.sa_status(), SaStatus::ReqInvalidGid);
    // The configured prefix and the default one both name the subnet.
    let mut r = McRegistry::new(McConfig {
        subnet_prefix: 0xfec0_0000_0000_0001,
        ..McConfig::default()
    });
    let out = r.join(&t, &q).unwrap();
    assert_eq!(out.record.port_gid, q.record.port_gid);
    assert!(r.join(&t, &join(mgid, B, FULL)).is_ok());
    assert_eq!(
        r.get(&mgid).unwrap().member(B).unwrap().port_gid,
        Gid::new(0xfec0_0000_0000_0001, B)
    );
}

#[test]
fn the_sa_assigns_an_mgid_when_asked_for_none() {
    let mut r = reg();
    let t = ports();
    let a = r.join(&t, &create(Gid::default(), A, FULL)).unwrap();
    let b = r.join(&t, &create(Gid::default(), B, FULL)).unwrap();
    assert_eq!(
        a.mgid.to_string(),
        "ff12:a01b:fe80:0000:0000:0000:0000:0000"
    );
    assert_eq!(
        b.mgid.to_string(),
        "ff12:a01b:fe80:0000:0000:0000:0000:0001"
    );
    assert_eq!(a.record.mgid, a.mgid);
    assert_eq!((a.mlid, b.mlid), (Lid(0xc000), Lid(0xc001)));
    // With Scope in the mask, its scope.
    let mut q = create(Gid::default(), C, FULL);
    q.comp_mask |= comp::SCOPE;
    q.record.scope = Scope::SiteLocal;
    let c = r.join(&t, &q).unwrap();
    assert_eq!(c.mgid.0[1], 0x15);
    assert_eq!(r.get(&c.mgid).unwrap().scope, Scope::SiteLocal);
    // Joining the assigned MGID is a plain join.
    assert!(!r.join(&t, &join(a.mgid, C, NON)).unwrap().created);
}

#[test]
fn an_mlid_asked_for_is_honoured_when_free() {
    let mut r = reg();
    let t = ports();
    let mut q = create(bcast(), A, FULL);
    q.comp_mask |= comp::MLID;
    q.record.mlid = Lid(0xc005);
    assert_eq!(r.join(&t, &q).unwrap().mlid, Lid(0xc005));
    // Taken: the lowest free instead.
    let mut q = create(Gid::default(), A, FULL);
    q.comp_mask |= comp::MLID;
    q.record.mlid = Lid(0xc005);
    assert_eq!(r.join(&t, &q).unwrap().mlid, Lid(0xc000));
    // Not in the mask: ignored.
    let mut q = create(Gid::default(), A, FULL);
    q.record.mlid = Lid(0xc007);
    assert_eq!(r.join(&t, &q).unwrap().mlid, Lid(0xc001));
}

#[test]
fn mlids_run_out_and_come_back() {
    let mut r = McRegistry::new(McConfig {
        mlid_capacity: 2,
        ..McConfig::default()
    });
    let t = ports();
    let a = r.join(&t, &create(Gid::default(), A, FULL)).unwrap();
    r.join(&t, &create(Gid::default(), A, FULL)).unwrap();
    let e = r.join(&t, &create(Gid::default(), A, FULL)).unwrap_err();
    assert_eq!(e, McError::NoMlid { capacity: 2 });
    assert_eq!(e.sa_status(), SaStatus::NoResources);
    // The failed create left nothing behind.
    assert_eq!(r.len(), 2);
    let out = r.leave(&t, &join(a.mgid, A, FULL)).unwrap();
    assert!(out.deleted);
    assert_eq!(out.notice, Some(McNotice::Deleted(a.mgid)));
    let c = r.join(&t, &create(Gid::default(), B, FULL)).unwrap();
    assert_eq!(c.mlid, a.mlid);
    // Shrinking the capacity names the groups beyond it.
    assert_eq!(
        r.set_mlid_capacity(1),
        vec![r.by_mlid(Lid(0xc001)).unwrap().mgid]
    );
}

#[test]
fn join_validation_against_the_group() {
    let t = ports();
    let mut r = reg();
    r.join(&t, &create(bcast(), A, FULL)).unwrap();
    let with = |f: &dyn Fn(&mut McRequest)| {
        let mut q = join(bcast(), B, FULL);
        f(&mut q);
        q
    };
    let cases: Vec<(McRequest, &str)> = vec![
        (
            with(&|q| {
                q.comp_mask |= comp::Q_KEY;
                q.record.q_key = 1;
            }),
            "Q_Key",
        ),
        (
            with(&|q| {
                q.comp_mask |= comp::P_KEY;
                q.record.p_key = PKey(0x8002);
            }),
            "P_Key",
        ),
        (
            with(&|q| {
                q.comp_mask |= comp::SL;
                q.record.sl = Sl(3);
            }),
            "SL",
        ),
        (
            with(&|q| {
                q.comp_mask |= comp::TCLASS;
                q.record.tclass = 1;
            }),
            "TClass",
        ),
        (
            with(&|q| {
                q.comp_mask |= comp::FLOW_LABEL;
                q.record.flow_label = 9;
            }),
            "FlowLabel",
        ),
        (
            with(&|q| {
                q.comp_mask |= comp::HOP_LIMIT;
                q.record.hop_limit = 9;
            }),
            "HopLimit",
        ),
        (
            with(&|q| {
                q.comp_mask |= comp::MTU_SELECTOR | comp::MTU;
                q.record.mtu_selector = Selector::GreaterThan;
                q.record.mtu = Mtu::Mtu4096;
            }),
            "MTU",
        ),
        (
            with(&|q| {
                q.comp_mask |= comp::RATE_SELECTOR | comp::RATE;
                q.record.rate_selector = Selector::LessThan;
                q.record.rate = Rate::Gbps40;
            }),
            "rate",
        ),
    ];
    for (q, field) in cases {
        assert_eq!(
            r.join(&t, &q).unwrap_err(),
            McError::Mismatch { field },
            "{field}"
        );
    }
    // Matching components pass; a limited P_Key matches a full group key.
    let ok = with(&|q| {
        q.comp_mask |= comp::P_KEY | comp::Q_KEY | comp::MTU_SELECTOR | comp::MTU;
        q.record.p_key = PKey(0x7fff);
        q.record.mtu_selector = Selector::GreaterThan;
        q.record.mtu = Mtu::Mtu2048;
        q.record.q_key = 0x0b1b;
    });
    assert!(r.join(&t, &ok).is_ok());
    // With validation off, mismatching components are ignored.
    let mut r = McRegistry::new(McConfig {
        join_validation: false,
        ..McConfig::default()
    });
    r.join(&t, &create(bcast(), A, FULL)).unwrap();
    assert!(
        r.join(
            &t,
            &with(&|q| {
                q.comp_mask |= comp::Q_KEY;
                q.record.q_key = 1;
            })
        )
        .is_ok()
    );
}

#[test]
fn a_port_must_carry_the_group_and_hold_its_partition() {
    let t = ports();
    let mut r = reg();
    r.join(&t, &create(bcast(), A, FULL)).unwrap();
    assert_eq!(
        r.join(&t, &join(bcast(), S, FULL)).unwrap_err(),
        McError::PortTooSlow {
            port: S,
            what: "MTU"
        }
    );
    assert_eq!(
        r.join(&t, &join(bcast(), M, FULL)).unwrap_err(),
        McError::PortTooSlow {
            port: M,
            what: "MTU"
        }
    );
    assert_eq!(
        r.join(&t, &join(bcast(), B, JoinState(0))).unwrap_err(),
        McError::EmptyJoinState
    );
    assert_eq!(
        r.join(&t, &join(bcast(), Guid(0x99), FULL)).unwrap_err(),
        McError::UnknownPort(Guid(0x99))
    );
    // A group of partition 0x0002: C lacks it; a limited member joins the default
    // partition's group.
    let mut r = reg();
    let mgid = ipoib_broadcast_mgid(PKey(2), Scope::LinkLocal);
    let mut q = create(mgid, C, FULL);
    q.record.p_key = PKey(0x8002);
    assert_eq!(
        r.join(&t, &q).unwrap_err(),
        McError::NotInPartition {
            port: C,
            pkey: PKey(0x8002)
        }
    );
    // Refused creates leave no group behind.
    assert!(r.is_empty() && r.mlids().in_use() == 0);
    r.join(&t, &create(bcast(), C, FULL)).unwrap();
    assert!(r.join(&t, &join(bcast(), L, NON)).is_ok());
}

#[test]
fn mtu_and_rate_of_a_new_group_follow_the_selectors() {
    let t = ports();
    let go = |sel: Selector, mtu: Mtu, rsel: Selector, rate: Rate| {
        let mut q = create(Gid::default(), M, FULL);
        q.comp_mask |= comp::MTU | comp::MTU_SELECTOR | comp::RATE | comp::RATE_SELECTOR;
        q.record.mtu_selector = sel;
        q.record.mtu = mtu;
        q.record.rate_selector = rsel;
        q.record.rate = rate;
        let mut r = reg();
        r.join(&t, &q)
            .map(|o| (r.get(&o.mgid).unwrap().mtu, r.get(&o.mgid).unwrap().rate))
    };
    use Selector::*;
    // M: 2048 bytes, 40 Gb/s.
    assert_eq!(
        go(Exactly, Mtu::Mtu1024, Exactly, Rate::Gbps10),
        Ok((Mtu::Mtu1024, Rate::Gbps10))
    );
    assert_eq!(
        go(GreaterThan, Mtu::Mtu1024, GreaterThan, Rate::Gbps10),
        Ok((Mtu::Mtu2048, Rate::Gbps40))
    );
    assert_eq!(
        go(LessThan, Mtu::Mtu2048, LessThan, Rate::Gbps40),
        Ok((Mtu::Mtu1024, Rate::Gbps30))
    );
    assert_eq!(
        go(LessThan, Mtu::Mtu4096, LessThan, Rate::Gbps100),
        Ok((Mtu::Mtu2048, Rate::Gbps40))
    );
    assert_eq!(
        go(Largest, Mtu::Mtu256, Largest, Rate::Gbps10),
        Ok((Mtu::Mtu2048, Rate::Gbps40))
    );
    assert!(matches!(
        go(GreaterThan, Mtu::Mtu2048, Exactly, Rate::Gbps10),
        Err(McError::NotRealizable { what: "MTU", .. })
    ));
    assert!(matches!(
        go(Exactly, Mtu::Mtu256, GreaterThan, Rate::Gbps40),
        Err(McError::NotRealizable { what: "rate", .. })
    ));
    assert!(matches!(
        go(LessThan, Mtu::Mtu256, Exactly, Rate::Gbps10),
        Err(McError::NotRealizable { what: "MTU", .. })
    ));
    // Exactly more than the port carries: the port check refuses it.
    assert!(matches!(
        go(Exactly, Mtu::Mtu4096, Exactly, Rate::Gbps10),
        Err(McError::PortTooSlow { what: "MTU", .. })
    ));
    // Undefined codes are refused up front.
    assert!(matches!(
        go(Exactly, Mtu::Unknown(7), Exactly, Rate::Gbps10),
        Err(McError::BadCode { what: "MTU", .. })
    ));
    assert!(matches!(
        go(Exactly, Mtu::Mtu256, Exactly, Rate::Unknown(0)),
        Err(McError::BadCode { what: "rate", .. })
    ));
}

#[test]
fn proxy_joins_and_who_may_change_a_membership() {
    let t = ports();
    let mut r = reg();
    r.join(&t, &create(bcast(), A, FULL)).unwrap();
    // B joins C by proxy (they share the default partition, B a full member).
    let mut q = join(bcast(), C, NON);
    q.requester = B;
    let out = r.join(&t, &q).unwrap();
    assert_eq!(out.record.join_state, NON);
    assert!(r.get(&bcast()).unwrap().member(C).unwrap().proxy);
    // A port of the group's partition may change a proxy membership.
    let mut q = join(bcast(), C, FULL);
    q.requester = A;
    assert!(r.join(&t, &q).is_ok());
    // A joined itself: only A may change that.
    let mut q = join(bcast(), A, NON);
    q.requester = B;
    assert_eq!(
        r.join(&t, &q).unwrap_err(),
        McError::NotAllowed {
            port: A,
            requester: B
        }
    );
    let mut q = join(bcast(), A, FULL);
    q.requester = B;
    assert_eq!(
        r.leave(&t, &q).unwrap_err(),
        McError::NotAllowed {
            port: A,
            requester: B
        }
    );
    // An unknown requester is refused.
    let mut q = join(bcast(), B, NON);
    q.requester = Guid(0x99);
    assert_eq!(
        r.join(&t, &q).unwrap_err(),
        McError::UnknownPort(Guid(0x99))
    );
    // Two limited members share no partition: no proxy join.
    let mut t2 = t.clone();
    t2.insert(Guid(0x77), Mtu::Mtu4096, Rate::Gbps100, vec![PKey(0x7fff)]);
    let mut q = join(bcast(), L, NON);
    q.requester = Guid(0x77);
    assert_eq!(
        r.join(&t2, &q).unwrap_err(),
        McError::NoSharedPartition {
            port: L,
            requester: Guid(0x77)
        }
    );
}

#[test]
fn leave_rules_and_group_deletion() {
    let t = ports();
    let mut r = reg();
    r.join(&t, &create(bcast(), A, FULL)).unwrap();
    r.join(&t, &join(bcast(), B, JoinState(NON.0 | SON.0)))
        .unwrap();
    // Bits not held, or none in common: refused.
    assert!(matches!(
        r.leave(&t, &join(bcast(), B, FULL)),
        Err(McError::JoinStateMismatch { .. })
    ));
    assert!(matches!(
        r.leave(&t, &join(bcast(), B, JoinState(NON.0 | FULL.0))),
        Err(McError::JoinStateMismatch { .. })
    ));
    assert!(matches!(
        r.leave(&t, &join(bcast(), C, FULL)),
        Err(McError::NotAMember { .. })
    ));
    assert!(matches!(
        r.leave(&t, &join(Gid([0xff; 16]), A, FULL)),
        Err(McError::NoGroup(_))
    ));
    // B stops receiving: a reroute, B stays a send-only member.
    let out = r.leave(&t, &join(bcast(), B, NON)).unwrap();
    assert!(out.reroute && !out.deleted);
    assert_eq!(out.record.join_state, SON);
    assert_eq!(r.get(&bcast()).unwrap().member(B).unwrap().join_state, SON);
    // A, the last full member, leaves: the group goes, B with it.
    let out = r.leave(&t, &join(bcast(), A, FULL)).unwrap();
    assert!(out.deleted);
    assert_eq!(out.record.join_state, JoinState(0));
    assert_eq!(out.notice, Some(McNotice::Deleted(bcast())));
    assert!(r.is_empty());
    assert_eq!(r.mlids().in_use(), 0);
}

#[test]
fn a_send_only_full_member_keeps_the_group_alive() {
    let t = ports();
    let mut r = reg();
    r.join(&t, &create(bcast(), A, FULL)).unwrap();
    r.join(&t, &join(bcast(), B, SOF)).unwrap();
    r.join(&t, &join(bcast(), L, NON)).unwrap();
    let out = r.leave(&t, &join(bcast(), A, FULL)).unwrap();
    assert!(!out.deleted && out.notice.is_none() && out.reroute);
    let g = r.get(&bcast()).unwrap();
    assert_eq!(g.len(), 2);
    let out = r.leave(&t, &join(bcast(), B, SOF)).unwrap();
    assert!(out.deleted);
    assert!(r.get(&bcast()).is_none());
}

#[test]
fn a_port_leaving_the_fabric_leaves_every_group() {
    let t = ports();
    let mut r = reg();
    let g1 = r.join(&t, &create(Gid::default(), A, FULL)).unwrap().mgid;
    let g2 = r.join(&t, &create(Gid::default(), B, FULL)).unwrap().mgid;
    r.join(&t, &join(g2, A, NON)).unwrap();
    let ev = r.drop_port(A);
    let m1 = Lid(0xc000);
    let m2 = Lid(0xc001);
    assert_eq!(
        ev,
        vec![
            McEvent::Notice(McNotice::Deleted(g1)),
            McEvent::Deleted { mgid: g1, mlid: m1 },
            McEvent::Reroute { mgid: g2, mlid: m2 },
        ]
    );
    assert!(r.drop_port(A).is_empty());
}

const TWO_PARTITIONS: &str = "\
Default=0x7fff, ipoib : ALL=full ;
Storage=0x0002, ipoib, mtu=5, rate=7, sl=3, scope=2, scope=5 :
    mgid=ff12:601b::16
    mgid=ff15::1,Q_Key=0x99,scope=8
    ALL ;
";

fn parts(text: &str) -> Partitions {
    Partitions::parse(text, Path::new("p.conf")).unwrap()
}

#[test]
fn partitions_pre_create_their_groups() {
    let p = parts(TWO_PARTITIONS);
    let mut r = reg();
    let sync = r.apply_partitions(&p);
    assert!(sync.failed.is_empty());
    let got: Vec<(String, Lid)> = r
        .groups()
        .map(|g| (g.mgid.to_string(), g.mlid))
        .collect::<Vec<_>>();
    // Creation order gives the MLIDs: default broadcast, storage broadcast (scopes 2 and 5),
    // storage mgroups (they inherit the partition's scopes; the last adds scope 8).
    let created: Vec<Gid> = sync
        .events
        .iter()
        .filter_map(|e| match e {
            McEvent::Created { mgid, .. } => Some(*mgid),
            _ => None,
        })
        .collect();
    let s = |g: &Gid| g.to_string();
    assert_eq!(
        created.iter().map(s).collect::<Vec<_>>(),
        vec![
            "ff12:401b:ffff:0000:0000:0000:ffff:ffff",
            "ff12:401b:8002:0000:0000:0000:ffff:ffff",
            "ff15:401b:8002:0000:0000:0000:ffff:ffff",
            "ff12:601b:8002:0000:0000:0000:0000:0016",
            "ff15:601b:8002:0000:0000:0000:0000:0016",
            "ff12:0000:0000:0000:0000:0000:0000:0001",
            "ff15:0000:0000:0000:0000:0000:0000:0001",
            "ff18:0000:0000:0000:0000:0000:0000:0001",
        ]
    );
    assert_eq!(got.len(), 8);
    for (i, g) in created.iter().enumerate() {
        assert_eq!(r.get(g).unwrap().mlid, Lid(0xc000 + i as u16));
    }
    let d = r.get(&bcast()).unwrap();
    assert!(d.well_known && d.is_empty());
    assert_eq!(d.q_key, 0x0b1b);
    assert_eq!(d.p_key, PKey(0xffff));
    assert_eq!((d.mtu, d.rate), (Mtu::Mtu2048, Rate::Gbps10));
    assert_eq!((d.scope, d.hop_limit), (Scope::LinkLocal, 0));
    let s5 = r.get(&created[2]).unwrap();
    assert_eq!(s5.p_key, PKey(0x8002));
    assert_eq!((s5.mtu, s5.rate), (Mtu::Mtu4096, Rate::Gbps40));
    assert_eq!((s5.scope, s5.hop_limit), (Scope::SiteLocal, 0xff));
    // Without QoS the partition's SL is not used.
    assert_eq!(s5.sl, Sl(0));
    let o = r.get(&created[7]).unwrap();
    assert_eq!((o.q_key, o.scope), (0x99, Scope::OrganizationLocal));
    // With QoS it is.
    let mut q = McRegistry::new(McConfig {
        qos: true,
        ..McConfig::default()
    });
    q.apply_partitions(&p);
    assert_eq!(q.get(&created[2]).unwrap().sl, Sl(3));

    // Applying again changes nothing.
    let again = r.apply_partitions(&p);
    assert!(again.events.is_empty() && again.failed.is_empty());
    assert_eq!(r.len(), 8);
}

#[test]
fn well_known_groups_outlive_their_members_and_go_with_their_partition() {
    let t = ports();
    let mut r = reg();
    r.apply_partitions(&parts(TWO_PARTITIONS));
    let storage = ipoib_broadcast_mgid(PKey(2), Scope::LinkLocal);
    let mut q = join(storage, A, FULL);
    q.record.p_key = PKey(0x8002);
    let out = r.join(&t, &q).unwrap();
    assert!(!out.created);
    assert_eq!(out.notice, Some(McNotice::Created(storage)));
    assert_eq!(out.record.mlid, Lid(0xc001));
    assert_eq!(out.record.q_key, 0x0b1b);
    // C lacks partition 2.
    assert!(matches!(
        r.join(&t, &join(storage, C, FULL)),
        Err(McError::NotInPartition { .. })
    ));
    let out = r.leave(&t, &join(storage, A, FULL)).unwrap();
    assert!(!out.deleted);
    assert_eq!(out.notice, Some(McNotice::Deleted(storage)));
    assert!(r.get(&storage).unwrap().is_empty());
    assert_eq!(r.get(&storage).unwrap().mlid, Lid(0xc001));

    // A group a client created is adopted by a later configuration.
    let mut r = reg();
    let mut c = create(storage, A, FULL);
    c.record.p_key = PKey(0x8002);
    c.record.q_key = 0x1234;
    r.join(&t, &c).unwrap();
    r.apply_partitions(&parts(TWO_PARTITIONS));
    let g = r.get(&storage).unwrap();
    assert!(g.well_known);
    assert_eq!((g.q_key, g.mlid), (0x1234, Lid(0xc000)));

    // The storage partition goes: its empty groups are deleted, the one with a full member
    // stays as an ordinary group.
    let sync = r.apply_partitions(&parts("Default=0x7fff, ipoib : ALL=full ;"));
    let deleted = sync
        .events
        .iter()
        .filter(|e| matches!(e, McEvent::Deleted { .. }))
        .count();
    assert_eq!(deleted, 6);
    let g = r.get(&storage).unwrap();
    assert!(!g.well_known);
    assert_eq!(r.len(), 2);
    assert!(r.leave(&t, &join(storage, A, FULL)).unwrap().deleted);
}

#[test]
fn ipoib_groups_need_their_broadcast_group() {
    let t = ports();
    let v4 = Gid([
        0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0xe0, 0, 0, 1,
    ]);
    let mut r = reg();
    assert_eq!(
        r.join(&t, &create(v4, A, FULL)).unwrap_err(),
        McError::NoBroadcastGroup {
            mgid: v4,
            broadcast: bcast()
        }
    );
    r.join(&t, &create(bcast(), A, FULL)).unwrap();
    // It must agree with the broadcast group.
    let mut q = create(v4, A, FULL);
    q.record.q_key = 7;
    assert_eq!(
        r.join(&t, &q).unwrap_err(),
        McError::Mismatch { field: "Q_Key" }
    );
    assert!(r.join(&t, &create(v4, A, FULL)).unwrap().created);
    // Without the validation, anything goes.
    let mut r = McRegistry::new(McConfig {
        ipoib_create_validation: false,
        ..McConfig::default()
    });
    assert!(r.join(&t, &create(v4, A, FULL)).is_ok());
}

#[test]
fn queries_match_as_opensm_does() {
    let t = ports();
    let mut r = reg();
    r.apply_partitions(&parts(TWO_PARTITIONS));
    r.join(&t, &join(bcast(), A, FULL)).unwrap();
    r.join(&t, &join(bcast(), B, NON)).unwrap();
    let all = mcr::Repr::default();
    // Untrusted, default partition only: the default broadcast group alone, no port.
    let got = r.query(&all, 0, &[PKey(0xffff)], false);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].mgid, bcast());
    assert_eq!(got[0].port_gid, Gid::default());
    assert_eq!(got[0].join_state, JoinState(0));
    // Both partitions: all eight.
    assert_eq!(r.query(&all, 0, &[PKey(0xffff), PKey(2)], false).len(), 8);
    // Trusted: one record per member.
    let got = r.query(&all, 0, &[PKey(0xffff)], true);
    let ports: Vec<Guid> = got.iter().map(|r| r.port_gid.guid()).collect();
    assert_eq!(ports, vec![A, B]);
    // Trusted with JoinState: members with exactly that state.
    let q = mcr::Repr {
        join_state: NON,
        ..all
    };
    let got = r.query(&q, comp::JOIN_STATE, &[PKey(0xffff)], true);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].port_gid.guid(), B);
    // By PortGID: that member's record, zeroed for the untrusted.
    let q = mcr::Repr {
        port_gid: Gid::new(PREFIX, A),
        ..all
    };
    let got = r.query(&q, comp::PORT_GID, &[PKey(0xffff)], true);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].join_state, FULL);
    assert_eq!(got[0].mlid, Lid(0xc000));
    // By MLID and by a mismatching Q_Key.
    let q = mcr::Repr {
        mlid: Lid(0xc001),
        ..all
    };
    let got = r.query(&q, comp::MLID, &[PKey(0x8002)], false);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].p_key, PKey(0x8002));
    let q = mcr::Repr { q_key: 5, ..all };
    assert!(r.query(&q, comp::Q_KEY, &[PKey(0xffff)], false).is_empty());
}

#[test]
fn pkey_helpers() {
    assert!(has_pkey(&[PKey(0x7fff)], PKey(0xffff)));
    assert!(has_pkey(&[], PKey(0)));
    assert!(!has_pkey(&[PKey(0)], PKey(0x8001)));
    assert!(share_pkey(&[PKey(0x7fff)], &[PKey(0xffff)]));
    assert!(!share_pkey(&[PKey(0x7fff)], &[PKey(0x7fff)]));
    assert!(!share_pkey(&[PKey(0x8001)], &[PKey(0xffff)]));
    assert!(share_pkey(&[], &[PKey(0xffff)]));
}

#[test]
fn every_error_has_a_status() {
    use SaStatus::*;
    let g = Gid::default();
    let cases = [
        (McError::NoGroup(g), ReqInvalid),
        (McError::EmptyJoinState, ReqInvalid),
        (McError::NoMgid, NoResources),
        (McError::ForeignPrefix { prefix: 1 }, ReqInvalidGid),
        (
            McError::InsufficientComponents { got: 0, missing: 1 },
            ReqInsufficientComponents,
        ),
    ];
    for (e, s) in cases {
        assert_eq!(e.sa_status(), s, "{e}");
        assert!(!e.to_string().is_empty());
    }
}

#[derive(Debug, Clone)]
enum Op {
    Join {
        group: usize,
        port: usize,
        js: u8,
        create: bool,
    },
    Leave {
        group: usize,
        port: usize,
        js: u8,
    },
    Drop {
        port: usize,
    },
}

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        (0..4usize, 0..6usize, 0..16u8, any::<bool>()).prop_map(|(group, port, js, create)| {
            Op::Join {
                group,
                port,
                js,
                create,
            }
        }),
        (0..4usize, 0..6usize, 0..16u8).prop_map(|(group, port, js)| Op::Leave { group, port, js }),
        (0..6usize).prop_map(|port| Op::Drop { port }),
    ]
}

proptest::proptest! {
    #[test]
    fn prop_registry_invariants(ops in proptest::collection::vec(op(), 1..60), well_known: bool) {
        let t = ports();
        let guids = [A, B, C, L, M, S];
        let mut mgids: Vec<Gid> = (1..=4u8)
            .map(|i| Gid([0xff, 0x15, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, i]))
            .collect();
        let mut r = McRegistry::new(McConfig { mlid_capacity: 3, ..McConfig::default() });
        if well_known {
            r.apply_partitions(&Partitions::no_file());
            mgids[0] = bcast();
        }
        for op in ops {
            let before = r.clone();
            let lowest_free = (0..3u16)
                .map(|i| Lid(0xc000 + i))
                .find(|&l| r.by_mlid(l).is_none());
            let res = match op {
                Op::Join { group, port, js, create: c } => {
                    let q = if c { create } else { join };
                    r.join(&t, &q(mgids[group], guids[port], JoinState(js))).map(|o| {
                        if o.created {
                            proptest::prop_assert_eq!(Some(o.mlid), lowest_free);
                        }
                        let m = r.get(&o.mgid).unwrap().member(guids[port]).unwrap();
                        proptest::prop_assert!(m.join_state.contains(JoinState(js)));
                        Ok(())
                    })
                }
                Op::Leave { group, port, js } => r
                    .leave(&t, &join(mgids[group], guids[port], JoinState(js)))
                    .map(|o| {
                        proptest::prop_assert_eq!(o.deleted, r.get(&o.mgid).is_none());
                        Ok(())
                    }),
                Op::Drop { port } => {
                    r.drop_port(guids[port]);
                    Ok(Ok(()))
                }
            };
            match res {
                Ok(check) => check?,
                // A refused request changes nothing.
                Err(_) => proptest::prop_assert_eq!(&r, &before),
            }
            proptest::prop_assert_eq!(r.mlids().in_use(), r.len());
            for g in r.groups() {
                proptest::prop_assert_eq!(r.mlids().owner(g.mlid), Some(g.mgid));
                proptest::prop_assert!(g.well_known || g.full_members() > 0);
                for (_, m) in g.members() {
                    proptest::prop_assert!(!m.join_state.is_empty());
                }
            }
        }
    }
}
