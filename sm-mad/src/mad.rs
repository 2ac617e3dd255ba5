//! The common MAD header (IBA 13.4.2): 24 bytes at the start of every MAD.

use crate::bits::{wire_enum, wire_struct};
use crate::{Error, MAD_LEN, Result, Tid};

wire_enum! {
    /// Management class (byte 1 of the header).
    pub enum MgmtClass: u8 {
        /// LID-routed subnet management.
        SubnLid = 0x01,
        /// Subnet administration.
        SubnAdm = 0x03,
        /// Performance management.
        Perf = 0x04,
        /// Baseboard management.
        BoardMgmt = 0x05,
        /// Device management.
        DevMgmt = 0x06,
        /// Communication management.
        ComMgmt = 0x07,
        /// SNMP tunnelling.
        Snmp = 0x08,
        /// Directed-route subnet management.
        SubnDirected = 0x81,
    }
}

wire_enum! {
    /// Method, including the response bit (bit 7): `GetResp` is 0x81.
    pub enum Method: u8 {
        Get = 0x01,
        Set = 0x02,
        Send = 0x03,
        Trap = 0x05,
        Report = 0x06,
        TrapRepress = 0x07,
        GetTable = 0x12,
        GetTraceTable = 0x13,
        GetMulti = 0x14,
        Delete = 0x15,
        GetResp = 0x81,
        ReportResp = 0x86,
        GetTableResp = 0x92,
        GetMultiResp = 0x94,
        DeleteResp = 0x95,
    }
}

impl Method {
    /// The response bit (R) is set.
    pub const fn is_response(self) -> bool {
        self.to_raw_value() & 0x80 != 0
    }

    /// The method that answers this one (`Set` is answered by `GetResp`, `Trap` by
    /// `TrapRepress`, which has no response bit).
    pub const fn response(self) -> Method {
        match self {
            Method::Get | Method::Set => Method::GetResp,
            Method::Trap => Method::TrapRepress,
            Method::Report => Method::ReportResp,
            Method::GetTable => Method::GetTableResp,
            Method::GetMulti => Method::GetMultiResp,
            Method::Delete => Method::DeleteResp,
            other => Method::from_raw_value(other.to_raw_value() | 0x80),
        }
    }
}

/// The 16-bit status field (IBA 13.4.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct MadStatus(pub u16);

impl MadStatus {
    /// Success.
    pub const OK: MadStatus = MadStatus(0);
    /// Busy: the requester may retry.
    pub const BUSY: MadStatus = MadStatus(0x0001);
    /// Redirection required.
    pub const REDIRECT: MadStatus = MadStatus(0x0002);
    /// Bad base or class version.
    pub const BAD_VERSION: MadStatus = MadStatus(1 << 2);
    /// Method not supported.
    pub const METHOD_UNSUPPORTED: MadStatus = MadStatus(2 << 2);
    /// Method / attribute combination not supported.
    pub const METHOD_ATTR_UNSUPPORTED: MadStatus = MadStatus(3 << 2);
    /// One or more fields of the attribute or modifier are invalid.
    pub const INVALID_FIELD: MadStatus = MadStatus(7 << 2);

    /// The invalid-field code (bits 2..=4).
    pub const fn invalid_field_code(self) -> u8 {
        ((self.0 >> 2) & 0x7) as u8
    }
    /// The class-specific part (bits 8..=14).
    pub const fn class_specific(self) -> u8 {
        ((self.0 >> 8) & 0x7f) as u8
    }
    /// A class-specific status code in bits 8..=14.
    pub const fn with_class_specific(code: u8) -> MadStatus {
        MadStatus(((code & 0x7f) as u16) << 8)
    }
    /// No error bit at all.
    pub const fn is_ok(self) -> bool {
        self.0 == 0
    }
}

impl crate::WireScalar for MadStatus {
    #[inline(always)]
    fn from_raw(raw: u64) -> Self {
        MadStatus(raw as u16)
    }
    #[inline(always)]
    fn to_raw(self) -> u64 {
        self.0 as u64
    }
}

impl serde::Serialize for MadStatus {
    fn serialize<S: serde::Serializer>(&self, s: S) -> core::result::Result<S::Ok, S::Error> {
        s.collect_str(&format_args!("{:#06x}", self.0))
    }
}

/// Base version of every MAD this codec knows.
pub const BASE_VERSION: u8 = 1;

/// The class version a class requires, where the codec knows it.
pub const fn class_version_of(class: MgmtClass) -> Option<u8> {
    match class {
        MgmtClass::SubnLid | MgmtClass::SubnDirected | MgmtClass::Perf => Some(1),
        MgmtClass::SubnAdm => Some(2),
        _ => None,
    }
}

/// The management class of a MAD too short (or too broken) to parse whole: enough to
/// route it to the right agent, which then answers with an error.
pub fn peek_class(buf: &[u8]) -> Option<MgmtClass> {
    (buf.len() >= field::MGMT_CLASS.end_byte()).then(|| field::MGMT_CLASS.get(buf))
}

/// The TID of a MAD that may be short.
pub fn peek_tid(buf: &[u8]) -> Option<Tid> {
    (buf.len() >= field::TID.end_byte()).then(|| field::TID.get(buf))
}

fn check(repr: &Repr) -> Result<()> {
    if repr.base_version != BASE_VERSION {
        return Err(Error::BadBaseVersion(repr.base_version));
    }
    if let Some(v) = class_version_of(repr.mgmt_class) {
        if v != repr.class_version {
            return Err(Error::BadClassVersion {
                class: repr.mgmt_class.to_raw_value(),
                version: repr.class_version,
            });
        }
    }
    Ok(())
}

wire_struct! {
    /// The common MAD header.
    struct "MAD header", 24;
    check check;
    fields {
        base_version: u8 = BASE_VERSION @ 0, 8;
        mgmt_class: MgmtClass = MGMT_CLASS @ 8, 8;
        class_version: u8 = CLASS_VERSION @ 16, 8;
        method: Method = METHOD @ 24, 8;
        status: MadStatus = STATUS @ 32, 16;
        /// Class-specific: the hop pointer and hop count in directed-route SMPs.
        class_specific: u16 = CLASS_SPECIFIC @ 48, 16;
        tid: Tid = TID @ 64, 64;
        attr_id: u16 = ATTR_ID @ 128, 16;
        attr_mod: u32 = ATTR_MOD @ 160, 32;
    }
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Management class (byte 1).
    #[inline]
    pub fn mgmt_class(&self) -> MgmtClass {
        self.get(field::MGMT_CLASS)
    }

    /// Method, with the response bit.
    #[inline]
    pub fn method(&self) -> Method {
        self.get(field::METHOD)
    }

    /// Status.
    #[inline]
    pub fn status(&self) -> MadStatus {
        self.get(field::STATUS)
    }

    /// Transaction id.
    #[inline]
    pub fn tid(&self) -> Tid {
        self.get(field::TID)
    }

    /// Attribute id.
    #[inline]
    pub fn attr_id(&self) -> u16 {
        self.get(field::ATTR_ID)
    }

    /// Attribute modifier.
    #[inline]
    pub fn attr_mod(&self) -> u32 {
        self.get(field::ATTR_MOD)
    }
}

/// A whole MAD always holds the header, so this view needs no length check.
impl<'a> From<&'a [u8; MAD_LEN]> for Packet<&'a [u8; MAD_LEN]> {
    fn from(mad: &'a [u8; MAD_LEN]) -> Self {
        Packet::new_unchecked(mad)
    }
}

/// A whole MAD always holds the header, so this view needs no length check.
impl<'a> From<&'a mut [u8; MAD_LEN]> for Packet<&'a mut [u8; MAD_LEN]> {
    fn from(mad: &'a mut [u8; MAD_LEN]) -> Self {
        Packet::new_unchecked(mad)
    }
}

impl Repr {
    /// A request header of `class` with the class's version.
    pub fn request(
        class: MgmtClass,
        method: Method,
        tid: Tid,
        attr_id: u16,
        attr_mod: u32,
    ) -> Repr {
        Repr {
            base_version: BASE_VERSION,
            mgmt_class: class,
            class_version: class_version_of(class).unwrap_or(1),
            method,
            status: MadStatus::OK,
            class_specific: 0,
            tid,
            attr_id,
            attr_mod,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A directed-route GetResp(NodeInfo) header as ibsim answered `smpquery -D nodeinfo 0`.
    const HDR: [u8; 24] = [
        0x01, 0x81, 0x01, 0x81, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x51, 0x2c, 0xd2,
        0x9a, 0x00, 0x11, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ];

    #[test]
    fn deconstruct() {
        let p = Packet::new_checked(&HDR[..]).unwrap();
        assert_eq!(p.get(field::MGMT_CLASS), MgmtClass::SubnDirected);
        assert_eq!(p.get(field::METHOD), Method::GetResp);
        assert_eq!(p.get(field::STATUS), MadStatus(0x8000));
        assert_eq!(p.get(field::TID), Tid(0x1_512c_d29a));
        assert_eq!(p.get(field::ATTR_ID), 0x0011);
    }

    #[test]
    fn named_accessors() {
        let p = Packet::new_checked(&HDR[..]).unwrap();
        assert_eq!(p.mgmt_class(), MgmtClass::SubnDirected);
        assert_eq!(p.method(), Method::GetResp);
        assert_eq!(p.status(), MadStatus(0x8000));
        assert_eq!(p.tid(), Tid(0x1_512c_d29a));
        assert_eq!(p.attr_id(), 0x0011);
        assert_eq!(p.attr_mod(), 0);
        assert!(Packet::new_checked(&HDR[..23]).is_err());

        // A whole MAD, read and written through the unchecked-by-construction view.
        let mut mad = [0u8; MAD_LEN];
        mad[..24].copy_from_slice(&HDR);
        let mut p = Packet::from(&mut mad);
        p.set(field::METHOD, Method::Set);
        p.set(field::ATTR_MOD, 0x0102_0304);
        assert_eq!(mad[3], 0x02);
        assert_eq!(mad[20..24], [1, 2, 3, 4]);
        let p = Packet::from(&mad);
        assert_eq!((p.method(), p.attr_mod()), (Method::Set, 0x0102_0304));
    }

    #[test]
    fn parse_emit_round_trip() {
        let r = Repr::parse(&HDR).unwrap();
        assert!(r.method.is_response());
        let mut out = [0xa5u8; 24];
        r.emit(&mut out).unwrap();
        assert_eq!(out, HDR);
    }

    #[test]
    fn bad_versions() {
        let mut b = HDR;
        b[0] = 2;
        assert_eq!(Repr::parse(&b), Err(Error::BadBaseVersion(2)));
        let mut b = HDR;
        b[2] = 2;
        assert_eq!(
            Repr::parse(&b),
            Err(Error::BadClassVersion {
                class: 0x81,
                version: 2
            })
        );
        assert!(matches!(
            Repr::parse(&HDR[..23]),
            Err(Error::Truncated {
                need: 24,
                got: 23,
                ..
            })
        ));
    }

    #[test]
    fn unknown_values_survive() {
        let mut b = HDR;
        b[1] = 0x30;
        b[3] = 0x7e;
        let r = Repr::parse(&b).unwrap();
        assert_eq!(r.mgmt_class, MgmtClass::Unknown(0x30));
        assert_eq!(r.method, Method::Unknown(0x7e));
        let mut out = [0u8; 24];
        r.emit(&mut out).unwrap();
        assert_eq!(out, b);
    }

    #[test]
    fn responses() {
        assert_eq!(Method::Set.response(), Method::GetResp);
        assert_eq!(Method::GetTable.response(), Method::GetTableResp);
        assert_eq!(Method::Trap.response(), Method::TrapRepress);
        assert_eq!(Method::Send.response(), Method::Unknown(0x83));
    }
}
