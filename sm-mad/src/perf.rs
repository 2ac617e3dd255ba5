//! The performance management class (0x04, IBA 16.1): PortCounters, the counters every
//! port's performance management agent keeps, read over QP1 with a LID-routed GMP. The MAD
//! is the common header, 40 reserved bytes, then the attribute at byte 64.
//!
//! PortCountersExtended carries the traffic counters in 64 bits, where ClassPortInfo's
//! capability mask says the agent has them.
//!
//! PortCounters' error counters are 4 to 16 bits wide and its data counters 32 bits, and
//! all of them stop at their maximum rather than wrap: a manager accumulates differences
//! between reads into 64-bit totals and clears a counter before it saturates.

use crate::bits::wire_struct;
use crate::mad::{self, Method, MgmtClass};
use crate::{MadStatus, Result, Tid, Wire};

/// The class version of performance management.
pub const CLASS_VERSION: u8 = 1;
/// PortCounters.
pub const PORT_COUNTERS: u16 = 0x0012;
/// PortCountersExtended (64-bit data counters).
pub const PORT_COUNTERS_EXTENDED: u16 = 0x001D;
/// Where the attribute starts in the MAD.
pub const DATA_OFFSET: usize = 64;
/// The Q_Key every GSI agent accepts.
pub const GSI_QKEY: u32 = 0x8001_0000;

wire_struct! {
    /// PortCounters (IBA 16.1.3.5).
    struct "PortCounters", 44;
    fields {
        /// The port the counters are of (0xFF: all ports, where supported).
        port_select: u8 = PORT_SELECT @ 8, 8;
        /// On a Set: which counters to clear (bit 0 SymbolErrorCounter, in field order).
        counter_select: u16 = COUNTER_SELECT @ 16, 16;
        symbol_errors: u16 = SYMBOL_ERRORS @ 32, 16;
        link_error_recoveries: u8 = LINK_ERROR_RECOVERIES @ 48, 8;
        link_downed: u8 = LINK_DOWNED @ 56, 8;
        rcv_errors: u16 = RCV_ERRORS @ 64, 16;
        rcv_remote_physical_errors: u16 = RCV_REMOTE_PHYSICAL_ERRORS @ 80, 16;
        rcv_switch_relay_errors: u16 = RCV_SWITCH_RELAY_ERRORS @ 96, 16;
        xmit_discards: u16 = XMIT_DISCARDS @ 112, 16;
        xmit_constraint_errors: u8 = XMIT_CONSTRAINT_ERRORS @ 128, 8;
        rcv_constraint_errors: u8 = RCV_CONSTRAINT_ERRORS @ 136, 8;
        counter_select2: u8 = COUNTER_SELECT2 @ 144, 8;
        local_link_integrity_errors: u8 = LOCAL_LINK_INTEGRITY_ERRORS @ 152, 4;
        excessive_buffer_overrun_errors: u8 = EXCESSIVE_BUFFER_OVERRUN_ERRORS @ 156, 4;
        vl15_dropped: u16 = VL15_DROPPED @ 176, 16;
        /// Data sent, in 4-byte words.
        xmit_data: u32 = XMIT_DATA @ 192, 32;
        /// Data received, in 4-byte words.
        rcv_data: u32 = RCV_DATA @ 224, 32;
        xmit_pkts: u32 = XMIT_PKTS @ 256, 32;
        rcv_pkts: u32 = RCV_PKTS @ 288, 32;
        xmit_wait: u32 = XMIT_WAIT @ 320, 32;
    }
}

/// A Get(PortCounters) of `port` as a whole MAD.
pub fn get_port_counters(tid: Tid, port: u8) -> [u8; 256] {
    request(tid, Method::Get, PORT_COUNTERS, port)
}

/// A Set(PortCounters) clearing the counters `select` names on `port`.
pub fn clear_port_counters(tid: Tid, port: u8, select: u16) -> [u8; 256] {
    let mut b = get_port_counters(tid, port);
    b[3] = Method::Set.to_raw_value();
    let pc = Repr {
        port_select: port,
        counter_select: select,
        ..Repr::default()
    };
    let _ = pc.emit(&mut b[DATA_OFFSET..]);
    b
}

/// PerfMgt ClassPortInfo CapabilityMask bits (IBA 16.1.2, Table 236).
pub mod cap {
    /// PortSelect 0xFF reads the sum of every port.
    pub const ALL_PORT_SELECT: u16 = 1 << 8;
    /// PortCountersExtended, with the unicast and multicast counters.
    pub const EXTENDED_WIDTH: u16 = 1 << 9;
    /// PortCountersExtended without the unicast and multicast counters.
    pub const EXTENDED_WIDTH_NO_IETF: u16 = 1 << 10;
    /// PortCounters.PortXmitWait is kept.
    pub const XMIT_WAIT: u16 = 1 << 12;
}

/// A performance management request of `attr` with PortSelect `port`.
fn request(tid: Tid, method: Method, attr: u16, port: u8) -> [u8; 256] {
    let mut b = [0u8; 256];
    let h = mad::Repr {
        base_version: mad::BASE_VERSION,
        mgmt_class: MgmtClass::Perf,
        class_version: CLASS_VERSION,
        method,
        status: MadStatus::OK,
        class_specific: 0,
        tid,
        attr_id: attr,
        attr_mod: 0,
    };
    // The header fits a 256-byte MAD by construction; PortSelect is the same byte in
    // PortCounters and PortCountersExtended.
    let _ = h.emit(&mut b);
    b[DATA_OFFSET + 1] = port;
    b
}

/// A Get(ClassPortInfo) of the performance management agent.
pub fn get_class_port_info(tid: Tid) -> [u8; 256] {
    request(tid, Method::Get, crate::class_port_info::ATTR_ID, 0)
}

/// The header and attribute `T` of a performance management MAD.
fn parse_attribute<T: Wire>(m: &[u8]) -> Result<(mad::Repr, T)> {
    let h = mad::Repr::parse(m)?;
    let data = m.get(DATA_OFFSET..).ok_or(crate::Error::Truncated {
        what: T::NAME,
        need: DATA_OFFSET + T::LEN,
        got: m.len(),
    })?;
    Ok((h, T::parse(data)?))
}

/// The header and ClassPortInfo of a GetResp.
pub fn parse_class_port_info(m: &[u8]) -> Result<(mad::Repr, crate::class_port_info::Repr)> {
    parse_attribute(m)
}

/// PortCountersExtended (IBA 16.1.4.11): 64-bit traffic counters that never saturate in
/// practice, so a manager needs no clearing for them.
pub mod ext {
    use super::*;

    wire_struct! {
        /// PortCountersExtended.
        struct "PortCountersExtended", 72;
        fields {
            port_select: u8 = PORT_SELECT @ 8, 8;
            /// On a Set: which counters to clear (bit 0 PortXmitData, in field order).
            counter_select: u16 = COUNTER_SELECT @ 16, 16;
            /// Data sent, in 4-byte words.
            xmit_data: u64 = XMIT_DATA @ 64, 64;
            /// Data received, in 4-byte words.
            rcv_data: u64 = RCV_DATA @ 128, 64;
            xmit_pkts: u64 = XMIT_PKTS @ 192, 64;
            rcv_pkts: u64 = RCV_PKTS @ 256, 64;
            unicast_xmit_pkts: u64 = UNICAST_XMIT_PKTS @ 320, 64;
            unicast_rcv_pkts: u64 = UNICAST_RCV_PKTS @ 384, 64;
            multicast_xmit_pkts: u64 = MULTICAST_XMIT_PKTS @ 448, 64;
            multicast_rcv_pkts: u64 = MULTICAST_RCV_PKTS @ 512, 64;
        }
    }

    /// A Get(PortCountersExtended) of `port`.
    pub fn get(tid: Tid, port: u8) -> [u8; 256] {
        request(tid, Method::Get, PORT_COUNTERS_EXTENDED, port)
    }

    /// The header and PortCountersExtended of a GetResp.
    pub fn parse(m: &[u8]) -> Result<(mad::Repr, Repr)> {
        parse_attribute(m)
    }
}

/// The header and PortCounters of a GetResp.
pub fn parse_port_counters(m: &[u8]) -> Result<(mad::Repr, Repr)> {
    parse_attribute(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every field at its own value, placed by hand from IBA Table 247 (byte offsets from
    /// the attribute's start).
    #[test]
    fn port_counters_fields_sit_where_the_spec_puts_them() {
        let mut d = [0u8; 44];
        d[1] = 3; // PortSelect
        d[4..6].copy_from_slice(&0x0102u16.to_be_bytes()); // SymbolErrorCounter
        d[6] = 0x03; // LinkErrorRecoveryCounter
        d[7] = 0x04; // LinkDownedCounter
        d[8..10].copy_from_slice(&0x0506u16.to_be_bytes()); // PortRcvErrors
        d[10..12].copy_from_slice(&0x0708u16.to_be_bytes());
        d[12..14].copy_from_slice(&0x090au16.to_be_bytes());
        d[14..16].copy_from_slice(&0x0b0cu16.to_be_bytes()); // PortXmitDiscards
        d[16] = 0x0d;
        d[17] = 0x0e;
        d[19] = 0x9a; // LocalLinkIntegrity 9, ExcessiveBufferOverrun 10
        d[22..24].copy_from_slice(&0x0f10u16.to_be_bytes()); // VL15Dropped
        d[24..28].copy_from_slice(&0x1112_1314u32.to_be_bytes());
        d[28..32].copy_from_slice(&0x1516_1718u32.to_be_bytes());
        d[32..36].copy_from_slice(&0x191a_1b1cu32.to_be_bytes());
        d[36..40].copy_from_slice(&0x1d1e_1f20u32.to_be_bytes());
        d[40..44].copy_from_slice(&0x2122_2324u32.to_be_bytes());
        let r = Repr::parse(&d).unwrap();
        assert_eq!(r.port_select, 3);
        assert_eq!(r.symbol_errors, 0x0102);
        assert_eq!(r.link_error_recoveries, 3);
        assert_eq!(r.link_downed, 4);
        assert_eq!(r.rcv_errors, 0x0506);
        assert_eq!(r.rcv_remote_physical_errors, 0x0708);
        assert_eq!(r.rcv_switch_relay_errors, 0x090a);
        assert_eq!(r.xmit_discards, 0x0b0c);
        assert_eq!(r.xmit_constraint_errors, 0x0d);
        assert_eq!(r.rcv_constraint_errors, 0x0e);
        assert_eq!(r.local_link_integrity_errors, 9);
        assert_eq!(r.excessive_buffer_overrun_errors, 10);
        assert_eq!(r.vl15_dropped, 0x0f10);
        assert_eq!(r.xmit_data, 0x1112_1314);
        assert_eq!(r.rcv_data, 0x1516_1718);
        assert_eq!(r.xmit_pkts, 0x191a_1b1c);
        assert_eq!(r.rcv_pkts, 0x1d1e_1f20);
        assert_eq!(r.xmit_wait, 0x2122_2324);
        let mut back = [0u8; 44];
        r.emit(&mut back).unwrap();
        assert_eq!(back, d);
    }

    /// Offsets from IBA Table 261, placed by hand.
    #[test]
    fn port_counters_extended_fields_sit_where_the_spec_puts_them() {
        let mut d = [0u8; 72];
        d[1] = 9;
        for i in 0..8u64 {
            let at = 8 + 8 * i as usize;
            d[at..at + 8].copy_from_slice(&(0x0100_0000_0000_0000 * (i + 1) + i).to_be_bytes());
        }
        let r = ext::Repr::parse(&d).unwrap();
        assert_eq!(r.port_select, 9);
        assert_eq!(r.xmit_data, 0x0100_0000_0000_0000);
        assert_eq!(r.rcv_data, 0x0200_0000_0000_0001);
        assert_eq!(r.xmit_pkts, 0x0300_0000_0000_0002);
        assert_eq!(r.rcv_pkts, 0x0400_0000_0000_0003);
        assert_eq!(r.unicast_xmit_pkts, 0x0500_0000_0000_0004);
        assert_eq!(r.multicast_rcv_pkts, 0x0800_0000_0000_0007);
        let mut back = [0u8; 72];
        r.emit(&mut back).unwrap();
        assert_eq!(back, d);
        let g = ext::get(Tid(5), 9);
        assert_eq!(u16::from_be_bytes([g[16], g[17]]), PORT_COUNTERS_EXTENDED);
        assert_eq!(ext::parse(&g).unwrap().1.port_select, 9);
        assert!(ext::parse(&g[..100]).is_err());
    }

    #[test]
    fn class_port_info_capabilities_are_read() {
        let g = get_class_port_info(Tid(3));
        assert_eq!(&g[..4], &[1, 0x04, 1, 0x01]);
        assert_eq!(u16::from_be_bytes([g[16], g[17]]), 0x0001);
        let mut a = g;
        a[3] = 0x81;
        a[DATA_OFFSET + 2..DATA_OFFSET + 4]
            .copy_from_slice(&(cap::EXTENDED_WIDTH | cap::XMIT_WAIT).to_be_bytes());
        let (h, c) = parse_class_port_info(&a).unwrap();
        assert_eq!(h.method, Method::GetResp);
        assert!(c.has_capability(cap::EXTENDED_WIDTH));
        assert!(!c.has_capability(cap::EXTENDED_WIDTH_NO_IETF));
    }

    #[test]
    fn a_get_and_a_clear_are_perf_class_mads() {
        let g = get_port_counters(Tid(0x1234), 7);
        assert_eq!(&g[..4], &[1, 0x04, 1, 0x01]);
        assert_eq!(u16::from_be_bytes([g[16], g[17]]), PORT_COUNTERS);
        assert_eq!(g[DATA_OFFSET + 1], 7);
        let c = clear_port_counters(Tid(1), 7, 0xffff);
        assert_eq!(c[3], 0x02);
        assert_eq!(&c[DATA_OFFSET + 2..DATA_OFFSET + 4], &[0xff, 0xff]);
        let (h, pc) = parse_port_counters(&g).unwrap();
        assert_eq!(h.tid, Tid(0x1234));
        assert_eq!(pc.port_select, 7);
        assert!(parse_port_counters(&g[..70]).is_err());
    }
}
