//! Reliable multi-packet transaction protocol (RMPP, IBA 13.6): the 12-byte header at bytes
//! 24..36 of a MAD of an RMPP class (subnet administration), and, in the submodules, the
//! sans-IO segmentation, sender and receiver that move a payload of any length in 256-byte
//! segments.
//!
//! Payload accounting follows the specification and the Linux MAD layer: every segment
//! repeats the class header (for SA: MAD header, RMPP header and the 20-byte SA header), and
//! `payload_length` counts everything after the RMPP header, so the SA header is counted once
//! **per segment**. A segment therefore carries [`SEGMENT_PAYLOAD`] (220) bytes of payload, of
//! which 200 are SA data. The first segment announces the whole transfer's length
//! (`segments * 220 - pad`), the last one its own (`220 - pad`), the others 0.
//!
//! Every SA GetTableResp goes through RMPP, even one that fits a single MAD or holds no
//! record: it is sent as one DATA segment flagged Active, First and Last with
//! `payload_length` = 20 + data bytes (20 alone when empty), and the requester acknowledges
//! it. This is what OpenSM asks of the Linux MAD layer. Other answers (GetResp, error
//! answers) leave the RMPP header inactive.
//!
//! The window starts at segment 1: the sender waits for the ACK of the first segment, whose
//! `new_window_last` opens the rest. The receiver accepts segments in order only and answers
//! a duplicate or a gap by acknowledging the last in-order segment again; the sender goes
//! back to the first unacknowledged segment when its timer expires.

use crate::bits::{wire_enum, wire_struct};
use crate::{Error, MAD_LEN, Result};

mod receiver;
mod segment;
mod sender;
#[cfg(test)]
mod transfer_tests;

pub use receiver::{ReceiverConfig, ReceiverState, RmppReceiver};
pub use segment::{Segmenter, segment};
pub use sender::{RmppSender, SenderConfig, SenderState, Timestamp};

/// Where the RMPP header starts in a MAD.
pub const OFFSET: usize = 24;
/// The only RMPP version.
pub const VERSION: u8 = 1;
/// Bytes of every MAD up to the end of the RMPP header.
pub const HEADER_END: usize = OFFSET + LEN;
/// Payload bytes one segment carries, as `payload_length` counts them (class header + data).
pub const SEGMENT_PAYLOAD: usize = MAD_LEN - HEADER_END;
/// `rmpp_resp_time` value meaning "no time given".
pub const NO_RESP_TIME: u8 = 0x1f;

wire_enum! {
    /// RMPPType.
    pub enum RmppType: u8 {
        Data = 1,
        Ack = 2,
        Stop = 3,
        Abort = 4,
    }
}

wire_enum! {
    /// RMPPStatus: 0 on DATA and ACK, the reason on STOP (1) and ABORT (118..=127).
    pub enum RmppStatus: u8 {
        Normal = 0,
        ResourcesExhausted = 1,
        TotalTimeTooLong = 118,
        InconsistentLastAndPayloadLength = 119,
        InconsistentFirstAndSegmentNumber = 120,
        BadRmppType = 121,
        NewWindowLastTooSmall = 122,
        SegmentNumberTooBig = 123,
        IllegalStatus = 124,
        UnsupportedVersion = 125,
        TooManyRetries = 126,
        Unspecified = 127,
    }
}

impl RmppStatus {
    /// A status an ABORT may carry.
    pub const fn is_abort(self) -> bool {
        matches!(self.to_raw_value(), 118..=127)
    }
}

/// RMPPFlags: the low three bits of byte 26.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct RmppFlags(pub u8);

impl RmppFlags {
    /// No flag: the MAD is not part of an RMPP transfer.
    pub const NONE: RmppFlags = RmppFlags(0);
    /// The RMPP header is in use.
    pub const ACTIVE: RmppFlags = RmppFlags(0x01);
    /// First DATA segment of a transfer.
    pub const FIRST: RmppFlags = RmppFlags(0x02);
    /// Last DATA segment of a transfer.
    pub const LAST: RmppFlags = RmppFlags(0x04);

    /// All bits of `other` are set.
    pub const fn contains(self, other: RmppFlags) -> bool {
        self.0 & other.0 == other.0
    }
    /// Active bit.
    pub const fn active(self) -> bool {
        self.contains(Self::ACTIVE)
    }
    /// First bit.
    pub const fn first(self) -> bool {
        self.contains(Self::FIRST)
    }
    /// Last bit.
    pub const fn last(self) -> bool {
        self.contains(Self::LAST)
    }
}

impl core::ops::BitOr for RmppFlags {
    type Output = RmppFlags;
    fn bitor(self, rhs: RmppFlags) -> RmppFlags {
        RmppFlags(self.0 | rhs.0)
    }
}

impl crate::WireScalar for RmppFlags {
    #[inline(always)]
    fn from_raw(raw: u64) -> Self {
        RmppFlags(raw as u8)
    }
    #[inline(always)]
    fn to_raw(self) -> u64 {
        self.0 as u64
    }
}

impl serde::Serialize for RmppFlags {
    fn serialize<S: serde::Serializer>(&self, s: S) -> core::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("RmppFlags", 3)?;
        st.serialize_field("active", &self.active())?;
        st.serialize_field("first", &self.first())?;
        st.serialize_field("last", &self.last())?;
        st.end()
    }
}

wire_struct! {
    /// The RMPP header. `data1` is the segment number (DATA, ACK) or 0; `data2` the payload
    /// length (first and last DATA segment), the new window last (ACK) or 0.
    struct "RMPP header", 12;
    fields {
        rmpp_version: u8 = RMPP_VERSION @ 0, 8;
        rmpp_type: RmppType = RMPP_TYPE @ 8, 8;
        rmpp_resp_time: u8 = RMPP_RESP_TIME @ 16, 5;
        rmpp_flags: RmppFlags = RMPP_FLAGS @ 21, 3;
        rmpp_status: RmppStatus = RMPP_STATUS @ 24, 8;
        data1: u32 = DATA1 @ 32, 32;
        data2: u32 = DATA2 @ 64, 32;
    }
}

impl Repr {
    /// A DATA segment header.
    pub fn data(segment_number: u32, flags: RmppFlags, payload_length: u32) -> Repr {
        Repr {
            rmpp_version: VERSION,
            rmpp_type: RmppType::Data,
            rmpp_resp_time: 0,
            rmpp_flags: RmppFlags::ACTIVE | flags,
            rmpp_status: RmppStatus::Normal,
            data1: segment_number,
            data2: payload_length,
        }
    }

    /// An ACK of every segment up to `segment_number`, allowing the sender up to
    /// `new_window_last`.
    pub fn ack(segment_number: u32, new_window_last: u32) -> Repr {
        Repr {
            rmpp_type: RmppType::Ack,
            rmpp_flags: RmppFlags::ACTIVE,
            ..Repr::data(segment_number, RmppFlags::NONE, new_window_last)
        }
    }

    /// An ABORT (status 118..=127) or STOP (status 1) header.
    pub fn abort(rmpp_type: RmppType, status: RmppStatus) -> Repr {
        Repr {
            rmpp_type,
            rmpp_status: status,
            rmpp_flags: RmppFlags::ACTIVE,
            ..Repr::data(0, RmppFlags::NONE, 0)
        }
    }

    /// The header is in use (Active flag).
    pub const fn is_active(&self) -> bool {
        self.rmpp_flags.active()
    }
    /// Segment number (DATA, ACK).
    pub const fn segment_number(&self) -> u32 {
        self.data1
    }
    /// Payload length (first and last DATA segment).
    pub const fn payload_length(&self) -> u32 {
        self.data2
    }
    /// New window last (ACK).
    pub const fn new_window_last(&self) -> u32 {
        self.data2
    }

    /// Reads the header of a whole MAD (bytes 24..36).
    pub fn parse_mad(mad: &[u8]) -> Result<Repr> {
        match mad.get(OFFSET..) {
            Some(b) if mad.len() >= HEADER_END => Repr::parse(b),
            _ => Err(Error::Truncated {
                what: "RMPP header",
                need: HEADER_END,
                got: mad.len(),
            }),
        }
    }

    /// Writes the header into a whole MAD (bytes 24..36).
    pub fn emit_mad(&self, mad: &mut [u8]) -> Result<()> {
        let got = mad.len();
        match mad.get_mut(OFFSET..) {
            Some(b) if got >= HEADER_END => self.emit(b),
            _ => Err(Error::BufferTooSmall {
                what: "RMPP header",
                need: HEADER_END,
                got,
            }),
        }
    }
}

/// Builds a 256-byte control MAD (ACK, STOP, ABORT) from the first `header.len()` bytes of a
/// transfer's MAD: the header copied, the method's response bit flipped when `flip` (an
/// answer from the other side), `rmpp` in place of the RMPP header (keeping the response
/// time), the data zeroed.
pub(crate) fn control(header: &[u8], rmpp: Repr, flip: bool) -> Result<[u8; MAD_LEN]> {
    let mut out = [0u8; MAD_LEN];
    let n = header.len().min(MAD_LEN);
    out[..n].copy_from_slice(&header[..n]);
    let old = Repr::parse_mad(&out)?;
    if flip {
        out[3] ^= 0x80;
    }
    Repr {
        rmpp_resp_time: old.rmpp_resp_time,
        ..rmpp
    }
    .emit_mad(&mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Bytes 24..36 of the first DATA segment of a three-segment transfer of 450 bytes of SA
    // data (3 * 220 - 150 bytes of pad = 510), response time 14, as the Linux MAD layer
    // writes it. Built from the specification: no capturable multi-segment transfer exists
    // under ibsim (the simulator's umad shim does not carry RMPP).
    const FIRST: [u8; 12] = [
        0x01, 0x01, 0x73, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x01, 0xfe,
    ];

    // Bytes 24..36 of OpenSM's GetTableResp(LinkRecord) as `saquery -d -d -d LR` received it
    // through ibsim's shim: OpenSM leaves segmentation to the kernel and only sets Active.
    const OPENSM_LR: [u8; 12] = [0x00, 0x00, 0x01, 0x00, 0, 0, 0, 0, 0, 0, 0, 0];

    #[test]
    fn parse_and_emit() {
        let r = Repr::parse(&FIRST).unwrap();
        assert_eq!(r.rmpp_version, 1);
        assert_eq!(r.rmpp_type, RmppType::Data);
        assert_eq!(r.rmpp_resp_time, 14);
        assert_eq!(r.rmpp_flags, RmppFlags::ACTIVE | RmppFlags::FIRST);
        assert_eq!(r.rmpp_status, RmppStatus::Normal);
        assert_eq!(r.segment_number(), 1);
        assert_eq!(r.payload_length(), 510);
        let mut want = Repr::data(1, RmppFlags::FIRST, 510);
        want.rmpp_resp_time = 14;
        assert_eq!(r, want);
        let mut out = [0xa5u8; 12];
        r.emit(&mut out).unwrap();
        assert_eq!(out, FIRST);
    }

    #[test]
    fn opensm_single_mad_is_only_active() {
        let r = Repr::parse(&OPENSM_LR).unwrap();
        assert!(r.is_active());
        assert!(!r.rmpp_flags.first() && !r.rmpp_flags.last());
        assert_eq!(r.rmpp_version, 0);
        assert_eq!(r.rmpp_type, RmppType::Unknown(0));
    }

    #[test]
    fn view_accessors() {
        let mut buf = FIRST;
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        assert_eq!(p.get(field::RMPP_RESP_TIME), 14);
        p.set(field::RMPP_FLAGS, RmppFlags::ACTIVE | RmppFlags::LAST);
        p.set(field::RMPP_TYPE, RmppType::Ack);
        p.set(field::DATA2, 0x0102_0304);
        assert_eq!(buf[1..3], [0x02, 0x75]);
        assert_eq!(buf[8..12], [1, 2, 3, 4]);
        // Every bit of the header is a field.
        let all = [0xffu8; 12];
        assert!(
            Packet::new_checked(&all[..])
                .unwrap()
                .check_reserved()
                .is_ok()
        );
    }

    #[test]
    fn whole_mad_helpers() {
        let mut mad = [0u8; MAD_LEN];
        Repr::ack(7, 12).emit_mad(&mut mad).unwrap();
        assert_eq!(
            mad[24..36],
            [1, 2, 1, 0, 0, 0, 0, 7, 0, 0, 0, 12],
            "ACK of segment 7, window to 12"
        );
        assert_eq!(Repr::parse_mad(&mad).unwrap().new_window_last(), 12);
        assert!(matches!(
            Repr::parse_mad(&mad[..35]),
            Err(Error::Truncated {
                need: 36,
                got: 35,
                ..
            })
        ));
        assert!(matches!(
            Repr::ack(1, 1).emit_mad(&mut mad[..30]),
            Err(Error::BufferTooSmall { need: 36, .. })
        ));
    }

    #[test]
    fn short_buffers() {
        assert!(matches!(
            Repr::parse(&FIRST[..11]),
            Err(Error::Truncated {
                need: 12,
                got: 11,
                ..
            })
        ));
        let mut small = [0u8; 11];
        assert!(Repr::ack(1, 1).emit(&mut small).is_err());
    }

    #[test]
    fn unknown_values_survive() {
        let b = [0x02, 0x09, 0xff, 0x42, 0, 0, 0, 0, 0, 0, 0, 0];
        let r = Repr::parse(&b).unwrap();
        assert_eq!(r.rmpp_type, RmppType::Unknown(9));
        assert_eq!(r.rmpp_status, RmppStatus::Unknown(0x42));
        assert_eq!(r.rmpp_flags, RmppFlags(7));
        assert_eq!(r.rmpp_resp_time, 0x1f);
        let mut out = [0u8; 12];
        r.emit(&mut out).unwrap();
        assert_eq!(out, b);
    }

    #[test]
    fn statuses() {
        assert!(RmppStatus::TotalTimeTooLong.is_abort());
        assert!(RmppStatus::Unspecified.is_abort());
        assert!(!RmppStatus::ResourcesExhausted.is_abort());
        assert_eq!(
            RmppStatus::from_raw_value(123),
            RmppStatus::SegmentNumberTooBig
        );
    }

    #[test]
    fn control_flips_the_method_and_keeps_resp_time() {
        let mut data = [0u8; 56];
        data[..4].copy_from_slice(&[1, 3, 2, 0x92]);
        data[24..36].copy_from_slice(&FIRST);
        data[40] = 0xee;
        let ack = control(&data, Repr::ack(1, 4), true).unwrap();
        assert_eq!(ack[3], 0x12);
        assert_eq!(ack[40], 0xee);
        let r = Repr::parse_mad(&ack).unwrap();
        assert_eq!(r.rmpp_resp_time, 14);
        assert_eq!(r.rmpp_type, RmppType::Ack);
        assert_eq!(r.rmpp_flags, RmppFlags::ACTIVE);
        assert!(ack[56..].iter().all(|&b| b == 0));
    }

    #[test]
    fn json() {
        let v = serde_json::to_value(Repr::parse(&FIRST).unwrap()).unwrap();
        assert_eq!(v["rmpp_type"], "Data");
        assert_eq!(v["rmpp_flags"]["first"], true);
        assert_eq!(v["data2"], 510);
    }
}
