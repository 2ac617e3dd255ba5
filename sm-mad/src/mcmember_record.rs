//! MCMemberRecord (IBA 15.2.5.17): a multicast group, or one port's membership of it.
//! 52 bytes (the SA pads it to 56 with the attribute offset).

use crate::attr::SaAttrId;
use crate::bits::{WireScalar, wire_enum, wire_struct};
use crate::path_record::{Mtu, Rate, Selector};
use crate::{Gid, Lid, PKey, Sl};
use core::fmt;

/// SA attribute id of MCMemberRecord.
pub const ATTR_ID: u16 = SaAttrId::McMemberRecord.to_raw_value();

/// The Q_Key of IPoIB broadcast groups.
pub const IPOIB_BROADCAST_Q_KEY: u32 = 0x0000_0B1B;

wire_enum! {
    /// Multicast scope (4 bits), also the low nibble of MGID byte 1.
    pub enum Scope: u8 {
        LinkLocal = 0x2,
        SiteLocal = 0x5,
        OrganizationLocal = 0x8,
        Global = 0xE,
    }
}

/// JoinState: four membership bits a port holds in (or asks of) a group.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct JoinState(pub u8);

impl JoinState {
    /// Sends and receives.
    pub const FULL_MEMBER: JoinState = JoinState(1 << 0);
    /// Receives only.
    pub const NON_MEMBER: JoinState = JoinState(1 << 1);
    /// Sends only, without counting as a member.
    pub const SEND_ONLY_NON_MEMBER: JoinState = JoinState(1 << 2);
    /// Sends only, as a full member (keeps the group alive).
    pub const SEND_ONLY_FULL_MEMBER: JoinState = JoinState(1 << 3);

    /// No bit set.
    pub const fn is_empty(self) -> bool {
        self.0 & 0xF == 0
    }
    /// Every bit of `other` is set in `self`.
    pub const fn contains(self, other: JoinState) -> bool {
        self.0 & other.0 == other.0
    }
    /// Both sets of bits.
    pub const fn union(self, other: JoinState) -> JoinState {
        JoinState(self.0 | other.0)
    }
    /// `self` without the bits of `other`.
    pub const fn without(self, other: JoinState) -> JoinState {
        JoinState(self.0 & !other.0)
    }
}

impl core::ops::BitOr for JoinState {
    type Output = JoinState;
    fn bitor(self, rhs: JoinState) -> JoinState {
        self.union(rhs)
    }
}

impl WireScalar for JoinState {
    #[inline(always)]
    fn from_raw(raw: u64) -> Self {
        JoinState(raw as u8)
    }
    #[inline(always)]
    fn to_raw(self) -> u64 {
        self.0 as u64
    }
}

impl fmt::Debug for JoinState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JoinState({:#x})", self.0)
    }
}

impl serde::Serialize for JoinState {
    fn serialize<S: serde::Serializer>(&self, s: S) -> core::result::Result<S::Ok, S::Error> {
        s.serialize_u8(self.0)
    }
}

/// The IPoIB IPv4 broadcast MGID of a partition: `ff1S:401b:PPPP::ffff:ffff`, S the scope and
/// PPPP the P_Key with the full-membership bit set.
pub fn ipoib_broadcast_mgid(p_key: PKey, scope: Scope) -> Gid {
    let pk = (p_key.0 | 0x8000).to_be_bytes();
    let mut g = [0u8; 16];
    g[0] = 0xff;
    g[1] = 0x10 | (scope.to_raw_value() & 0x0f);
    g[2] = 0x40;
    g[3] = 0x1b;
    g[4] = pk[0];
    g[5] = pk[1];
    g[12..].copy_from_slice(&[0xff; 4]);
    Gid(g)
}

/// The scope nibble of a multicast GID (`None` if the GID is not multicast).
pub fn mgid_scope(mgid: &Gid) -> Option<Scope> {
    (mgid.0[0] == 0xff).then(|| Scope::from_raw_value(mgid.0[1] & 0x0f))
}

wire_struct! {
    /// MCMemberRecord.
    struct "MCMemberRecord", 52;
    fields {
        mgid: Gid = MGID @ 0, 128;
        port_gid: Gid = PORT_GID @ 128, 128;
        q_key: u32 = Q_KEY @ 256, 32;
        mlid: Lid = MLID @ 288, 16;
        mtu_selector: Selector = MTU_SELECTOR @ 304, 2;
        mtu: Mtu = MTU @ 306, 6;
        tclass: u8 = TCLASS @ 312, 8;
        p_key: PKey = P_KEY @ 320, 16;
        rate_selector: Selector = RATE_SELECTOR @ 336, 2;
        rate: Rate = RATE @ 338, 6;
        packet_life_time_selector: Selector = PACKET_LIFE_TIME_SELECTOR @ 344, 2;
        packet_life_time: u8 = PACKET_LIFE_TIME @ 346, 6;
        sl: Sl = SL @ 352, 4;
        flow_label: u32 = FLOW_LABEL @ 356, 20;
        hop_limit: u8 = HOP_LIMIT @ 376, 8;
        scope: Scope = SCOPE @ 384, 4;
        join_state: JoinState = JOIN_STATE @ 388, 4;
        /// The requester joins on behalf of `port_gid` (the most significant bit of byte 49).
        proxy_join: bool = PROXY_JOIN @ 392, 1;
    }
}

/// Component mask bits, in field order.
pub mod comp {
    pub const MGID: u64 = 1 << 0;
    pub const PORT_GID: u64 = 1 << 1;
    pub const Q_KEY: u64 = 1 << 2;
    pub const MLID: u64 = 1 << 3;
    pub const MTU_SELECTOR: u64 = 1 << 4;
    pub const MTU: u64 = 1 << 5;
    pub const TCLASS: u64 = 1 << 6;
    pub const P_KEY: u64 = 1 << 7;
    pub const RATE_SELECTOR: u64 = 1 << 8;
    pub const RATE: u64 = 1 << 9;
    pub const PACKET_LIFE_TIME_SELECTOR: u64 = 1 << 10;
    pub const PACKET_LIFE_TIME: u64 = 1 << 11;
    pub const SL: u64 = 1 << 12;
    pub const FLOW_LABEL: u64 = 1 << 13;
    pub const HOP_LIMIT: u64 = 1 << 14;
    pub const SCOPE: u64 = 1 << 15;
    pub const JOIN_STATE: u64 = 1 << 16;
    pub const PROXY_JOIN: u64 = 1 << 17;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Guid;

    // OpenSM 3.3.23's answer to a join (Set(MCMemberRecord), component mask MGID | PortGID |
    // JoinState, full member) sent by a test client on "Hca2" (fe80::10:4) of ibsim's
    // net.2sw2path4hca, for the IPoIB broadcast group OpenSM creates in the default partition.
    const JOIN: [u8; 52] = [
        0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff,
        0xff, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10,
        0x00, 0x04, 0x00, 0x00, 0x0b, 0x1b, 0xc0, 0x00, 0x84, 0x00, 0xff, 0xff, 0x83, 0x92, 0x00,
        0x00, 0x00, 0x00, 0x21, 0x00, 0x00, 0x00,
    ];

    // The same group as `saquery -d -d -d -g` lists it (no port, no join state).
    const GROUP: [u8; 52] = [
        0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff,
        0xff, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x0b, 0x1b, 0xc0, 0x00, 0x84, 0x00, 0xff, 0xff, 0x83, 0x92, 0x00,
        0x00, 0x00, 0x00, 0x20, 0x00, 0x00, 0x00,
    ];

    fn join() -> Repr {
        Repr {
            mgid: ipoib_broadcast_mgid(PKey(0x7fff), Scope::LinkLocal),
            port_gid: Gid::new(0xfe80_0000_0000_0000, Guid(0x10_0004)),
            q_key: IPOIB_BROADCAST_Q_KEY,
            mlid: Lid(0xc000),
            mtu_selector: Selector::Exactly,
            mtu: Mtu::Mtu2048,
            tclass: 0,
            p_key: PKey(0xffff),
            rate_selector: Selector::Exactly,
            rate: Rate::Gbps10,
            packet_life_time_selector: Selector::Exactly,
            packet_life_time: 18,
            sl: Sl(0),
            flow_label: 0,
            hop_limit: 0,
            scope: Scope::LinkLocal,
            join_state: JoinState::FULL_MEMBER,
            proxy_join: false,
        }
    }

    #[test]
    fn parse_and_emit() {
        assert_eq!(Repr::parse(&JOIN).unwrap(), join());
        let mut out = [0xa5u8; 52];
        join().emit(&mut out).unwrap();
        assert_eq!(out, JOIN);

        let g = Repr::parse(&GROUP).unwrap();
        assert_eq!(
            g,
            Repr {
                port_gid: Gid::default(),
                join_state: JoinState(0),
                ..join()
            }
        );
        assert!(g.join_state.is_empty());
        g.emit(&mut out).unwrap();
        assert_eq!(out, GROUP);
        assert!(
            Packet::new_checked(&JOIN[..])
                .unwrap()
                .check_reserved()
                .is_ok()
        );
    }

    #[test]
    fn view_accessors() {
        let mut buf = JOIN;
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        assert_eq!(p.get(field::MLID), Lid(0xc000));
        assert_eq!(p.get(field::SCOPE), Scope::LinkLocal);
        p.set(field::PROXY_JOIN, true);
        p.set(field::JOIN_STATE, JoinState::SEND_ONLY_FULL_MEMBER);
        p.set(field::SL, Sl(3));
        p.set(field::FLOW_LABEL, 0x12345);
        p.set(field::HOP_LIMIT, 0x40);
        assert_eq!(&buf[44..50], &[0x31, 0x23, 0x45, 0x40, 0x28, 0x80]);
    }

    #[test]
    fn reserved_and_unknown() {
        let mut buf = JOIN;
        buf[49] = 0x01; // where OpenSM's C bit-field puts ProxyJoin; reserved in the spec
        assert!(matches!(
            Packet::new_checked(&buf[..]).unwrap().check_reserved(),
            Err(crate::Error::ReservedBitsSet { offset: 49, .. })
        ));
        buf[49] = 0;
        buf[48] = 0x3f; // scope 3, all four join bits
        let r = Repr::parse(&buf).unwrap();
        assert_eq!(r.scope, Scope::Unknown(3));
        assert_eq!(r.join_state, JoinState(0xf));
        let mut out = [0u8; 52];
        r.emit(&mut out).unwrap();
        assert_eq!(out, buf);
    }

    #[test]
    fn short_buffers() {
        assert!(matches!(
            Repr::parse(&JOIN[..51]),
            Err(crate::Error::Truncated {
                need: 52,
                got: 51,
                ..
            })
        ));
        assert!(join().emit(&mut [0u8; 51]).is_err());
    }

    #[test]
    fn join_state_bits() {
        let js = JoinState::FULL_MEMBER | JoinState::SEND_ONLY_NON_MEMBER;
        assert_eq!(js, JoinState(0b0101));
        assert!(js.contains(JoinState::FULL_MEMBER));
        assert!(!js.contains(JoinState::NON_MEMBER));
        assert_eq!(js.without(JoinState::FULL_MEMBER), JoinState(0b0100));
        assert_eq!(JoinState::SEND_ONLY_FULL_MEMBER.0, 8);
    }

    #[test]
    fn broadcast_mgid() {
        // OpenSM's group for the default partition (P_Key 0x7fff plus the membership bit).
        assert_eq!(
            ipoib_broadcast_mgid(PKey::DEFAULT, Scope::LinkLocal),
            Gid(JOIN[..16].try_into().unwrap())
        );
        let g = ipoib_broadcast_mgid(PKey(0x0002), Scope::SiteLocal);
        assert_eq!(g.to_string(), "ff15:401b:8002:0000:0000:0000:ffff:ffff");
        assert_eq!(mgid_scope(&g), Some(Scope::SiteLocal));
        assert_eq!(mgid_scope(&Gid::default()), None);
    }

    #[test]
    fn component_mask() {
        // The join above used MGID | PortGID | JoinState.
        assert_eq!(comp::MGID | comp::PORT_GID | comp::JOIN_STATE, 0x1_0003);
    }

    #[test]
    fn json() {
        let v = serde_json::to_value(join()).unwrap();
        assert_eq!(v["mgid"], "ff12:401b:ffff:0000:0000:0000:ffff:ffff");
        assert_eq!(v["mlid"], 0xc000);
        assert_eq!(v["join_state"], 1);
        assert_eq!(v["scope"], "LinkLocal");
        assert_eq!(v["proxy_join"], false);
    }
}
