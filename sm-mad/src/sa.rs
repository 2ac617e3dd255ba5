//! Subnet administration MADs (IBA 15.2.1): class 0x03, version 2. 256 bytes: the MAD
//! header, the RMPP header, the 20-byte SA header (SM_Key, AttributeOffset, ComponentMask)
//! and 200 bytes of SA data.
//!
//! A table answer (GetTableResp) is a list of records, each `attribute_offset * 8` bytes
//! apart, spread over RMPP segments (see [`crate::rmpp`]); [`records`] walks them once the
//! payload is reassembled.

use crate::bits::{packet_view, wire_via_inherent};
use core::marker::PhantomData;

use crate::bits::{Bytes, Field, wire_enum};
use crate::mad::{self, BASE_VERSION, MadStatus, Method, MgmtClass};
use crate::{Error, MAD_LEN, Result, Tid, Wire, rmpp};

/// Length of every SA MAD.
pub const LEN: usize = MAD_LEN;
/// The class version of subnet administration.
pub const CLASS_VERSION: u8 = 2;
/// Bytes before the SA data: MAD header, RMPP header, SA header. Every RMPP segment repeats
/// them.
pub const HEADER_LEN: usize = 56;
/// Length of the SA header alone; `payload_length` counts it once per segment.
pub const SA_HEADER_LEN: usize = HEADER_LEN - rmpp::HEADER_END;
/// SA data bytes per MAD (per RMPP segment).
pub const DATA_LEN: usize = LEN - HEADER_LEN;

/// Bit layout of the SA MAD beyond the common header (`mad::field`) and the RMPP header
/// (`rmpp::field`, at byte [`rmpp::OFFSET`]).
pub mod field {
    use super::*;
    /// SM_Key: proves the requester is a trusted SM (0 from untrusted clients).
    pub const SM_KEY: Field<u64> = Field::new("sm_key", 288, 64);
    /// Distance between records in 8-byte units (0 in requests and in empty answers).
    pub const ATTRIBUTE_OFFSET: Field<u16> = Field::new("attribute_offset", 352, 16);
    /// Which fields of the template record a query matches on.
    pub const COMPONENT_MASK: Field<u64> = Field::new("component_mask", 384, 64);
    /// The RMPP header.
    pub const RMPP: core::ops::Range<usize> = rmpp::OFFSET..rmpp::HEADER_END;
    /// The SA data.
    pub const DATA: core::ops::Range<usize> = HEADER_LEN..LEN;

    /// Every field as (name, bit offset, bit width); all other bits are reserved (the
    /// common header's class-specific word, its reserved word, and bytes 46..48).
    pub const ALL: &[(&str, usize, usize)] = &[
        ("base_version", 0, 8),
        ("mgmt_class", 8, 8),
        ("class_version", 16, 8),
        ("method", 24, 8),
        ("status", 32, 16),
        ("tid", 64, 64),
        ("attr_id", 128, 16),
        ("attr_mod", 160, 32),
        ("rmpp", 192, 96),
        ("sm_key", 288, 64),
        ("attribute_offset", 352, 16),
        ("component_mask", 384, 64),
        ("data", 448, 1600),
    ];
}

wire_enum! {
    /// The SA's class-specific status codes: the code shifted left by 8 in the MAD status
    /// (OpenSM masks the class-specific part as 0xFF00; all codes fit bits 8..=14).
    pub enum SaStatus: u8 {
        NoResources = 1,
        ReqInvalid = 2,
        NoRecords = 3,
        TooManyRecords = 4,
        ReqInvalidGid = 5,
        ReqInsufficientComponents = 6,
        ReqDenied = 7,
        PrioritySuggested = 8,
    }
}

impl SaStatus {
    /// The MAD status carrying this code.
    pub const fn to_mad_status(self) -> MadStatus {
        MadStatus::with_class_specific(self.to_raw_value())
    }
    /// The SA code in a MAD status, `None` when there is none.
    pub const fn from_mad_status(status: MadStatus) -> Option<SaStatus> {
        match status.class_specific() {
            0 => None,
            c => Some(SaStatus::from_raw_value(c)),
        }
    }
}

impl From<SaStatus> for MadStatus {
    fn from(s: SaStatus) -> MadStatus {
        s.to_mad_status()
    }
}

/// ERR_NO_RESOURCES.
pub const ERR_NO_RESOURCES: MadStatus = SaStatus::NoResources.to_mad_status();
/// ERR_REQ_INVALID.
pub const ERR_REQ_INVALID: MadStatus = SaStatus::ReqInvalid.to_mad_status();
/// ERR_NO_RECORDS.
pub const ERR_NO_RECORDS: MadStatus = SaStatus::NoRecords.to_mad_status();
/// ERR_TOO_MANY_RECORDS.
pub const ERR_TOO_MANY_RECORDS: MadStatus = SaStatus::TooManyRecords.to_mad_status();
/// ERR_REQ_INVALID_GID.
pub const ERR_REQ_INVALID_GID: MadStatus = SaStatus::ReqInvalidGid.to_mad_status();
/// ERR_REQ_INSUFFICIENT_COMPONENTS.
pub const ERR_REQ_INSUFFICIENT_COMPONENTS: MadStatus =
    SaStatus::ReqInsufficientComponents.to_mad_status();
/// ERR_REQ_DENIED.
pub const ERR_REQ_DENIED: MadStatus = SaStatus::ReqDenied.to_mad_status();

packet_view! {
    /// Zero-copy view over an SA MAD.
    view "SA MAD", LEN
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Reads one field (of `mad::field` or `sa::field`).
    #[inline]
    pub fn get<V: crate::WireValue>(&self, f: Field<V>) -> V {
        f.get(self.buffer.as_ref())
    }

    /// View of the RMPP header.
    pub fn rmpp(&self) -> rmpp::Packet<&[u8]> {
        rmpp::Packet::new_unchecked(&self.buffer.as_ref()[field::RMPP])
    }

    /// The 200 bytes of SA data.
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::DATA]
    }

    /// Fails on the first reserved bit that is set.
    pub fn check_reserved(&self) -> Result<()> {
        crate::bits::check_reserved("SA MAD", self.buffer.as_ref(), LEN, field::ALL)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Writes one field.
    #[inline]
    pub fn set<V: crate::WireValue>(&mut self, f: Field<V>, v: V) {
        f.set(self.buffer.as_mut(), v)
    }

    /// View of the RMPP header, writable.
    pub fn rmpp_mut(&mut self) -> rmpp::Packet<&mut [u8]> {
        rmpp::Packet::new_unchecked(&mut self.buffer.as_mut()[field::RMPP])
    }

    /// The SA data, writable.
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::DATA]
    }
}

/// An SA MAD: the header fields and the 200 data bytes of one MAD (one RMPP segment).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct Repr {
    pub method: Method,
    pub status: MadStatus,
    pub tid: Tid,
    pub attr_id: u16,
    pub attr_mod: u32,
    pub rmpp: rmpp::Repr,
    pub sm_key: u64,
    pub attribute_offset: u16,
    pub component_mask: u64,
    pub data: Bytes<DATA_LEN>,
}

impl Repr {
    /// A request with an inactive RMPP header and empty data.
    pub fn request(method: Method, tid: Tid, attr_id: u16, component_mask: u64) -> Repr {
        Repr {
            method,
            tid,
            attr_id,
            component_mask,
            ..Repr::default()
        }
    }

    /// The header of the answer to this request: the response method, the same TID,
    /// attribute and component mask, SM_Key 0 (C15-0.1.5), empty data.
    pub fn response(&self, status: MadStatus) -> Repr {
        Repr {
            method: self.method.response(),
            status,
            tid: self.tid,
            attr_id: self.attr_id,
            attr_mod: self.attr_mod,
            component_mask: self.component_mask,
            ..Repr::default()
        }
    }

    /// The common MAD header.
    pub fn mad_header(&self) -> mad::Repr {
        mad::Repr {
            base_version: BASE_VERSION,
            mgmt_class: MgmtClass::SubnAdm,
            class_version: CLASS_VERSION,
            method: self.method,
            status: self.status,
            class_specific: 0,
            tid: self.tid,
            attr_id: self.attr_id,
            attr_mod: self.attr_mod,
        }
    }

    /// The SA data this single MAD holds: as many bytes as a one-segment RMPP transfer
    /// declares (`payload_length` minus the SA header), otherwise all 200.
    pub fn payload(&self) -> &[u8] {
        let r = &self.rmpp;
        let declared = r.rmpp_version == rmpp::VERSION
            && r.rmpp_type == rmpp::RmppType::Data
            && r.rmpp_flags
                .contains(rmpp::RmppFlags::ACTIVE | rmpp::RmppFlags::FIRST)
            && r.rmpp_flags.last();
        let len = match r.payload_length() as usize {
            n if declared && (SA_HEADER_LEN..=rmpp::SEGMENT_PAYLOAD).contains(&n) => {
                n - SA_HEADER_LEN
            }
            _ => DATA_LEN,
        };
        &self.data.0[..len]
    }

    /// Parses an SA MAD from a 256-byte buffer.
    pub fn parse(buf: &[u8]) -> Result<Repr> {
        let got = buf.len();
        if got < LEN {
            return Err(Error::Truncated {
                what: "SA MAD",
                need: LEN,
                got,
            });
        }
        let hdr = mad::Repr::parse(buf)?;
        if hdr.mgmt_class != MgmtClass::SubnAdm {
            return Err(Error::UnsupportedClass(hdr.mgmt_class.to_raw_value()));
        }
        let p = Packet::new_unchecked(buf);
        let mut data = [0u8; DATA_LEN];
        data.copy_from_slice(p.data());
        Ok(Repr {
            method: hdr.method,
            status: hdr.status,
            tid: hdr.tid,
            attr_id: hdr.attr_id,
            attr_mod: hdr.attr_mod,
            rmpp: rmpp::Repr::parse_mad(buf)?,
            sm_key: p.get(field::SM_KEY),
            attribute_offset: p.get(field::ATTRIBUTE_OFFSET),
            component_mask: p.get(field::COMPONENT_MASK),
            data: Bytes(data),
        })
    }

    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }

    /// Writes the 56 header bytes (MAD, RMPP and SA headers) into the start of `buf`.
    pub fn emit_header(&self, buf: &mut [u8]) -> Result<()> {
        let got = buf.len();
        if got < HEADER_LEN {
            return Err(Error::BufferTooSmall {
                what: "SA MAD header",
                need: HEADER_LEN,
                got,
            });
        }
        let buf = &mut buf[..HEADER_LEN];
        buf.fill(0);
        self.mad_header().emit(buf)?;
        self.rmpp.emit_mad(buf)?;
        field::SM_KEY.set(buf, self.sm_key);
        field::ATTRIBUTE_OFFSET.set(buf, self.attribute_offset);
        field::COMPONENT_MASK.set(buf, self.component_mask);
        Ok(())
    }

    /// Writes the MAD into the first 256 bytes of `buf`; reserved bits are zeroed.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let got = buf.len();
        if got < LEN {
            return Err(Error::BufferTooSmall {
                what: "SA MAD",
                need: LEN,
                got,
            });
        }
        self.emit_header(buf)?;
        buf[field::DATA].copy_from_slice(&self.data.0);
        Ok(())
    }

    /// Emits into a fresh 256-byte array.
    pub fn to_bytes(&self) -> Result<[u8; LEN]> {
        let mut b = [0u8; LEN];
        self.emit(&mut b)?;
        Ok(b)
    }
}

wire_via_inherent!("SA MAD", LEN);

/// The attribute offset (in 8-byte units) of a record of `len` bytes: its length rounded up
/// to a multiple of 8. `None` if that does not fit 16 bits.
pub const fn attribute_offset_for(len: usize) -> Option<u16> {
    let units = len.div_ceil(8);
    if units > u16::MAX as usize {
        None
    } else {
        Some(units as u16)
    }
}

/// The records of a reassembled SA payload, as byte slices `attribute_offset * 8` long (the
/// last one may lack its padding).
#[derive(Debug, Clone)]
pub struct RecordSlices<'a> {
    rest: &'a [u8],
    stride: usize,
}

impl<'a> Iterator for RecordSlices<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        if self.rest.is_empty() {
            return None;
        }
        let n = self.stride.min(self.rest.len());
        let (rec, rest) = self.rest.split_at(n);
        self.rest = rest;
        Some(rec)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.rest.len().div_ceil(self.stride.max(1));
        (n, Some(n))
    }
}

impl ExactSizeIterator for RecordSlices<'_> {}

/// Splits `payload` (the SA data of a whole transfer, without SA headers) into records of
/// `record_len` bytes spaced `attribute_offset * 8` apart. An empty payload has no records
/// whatever the offset (an empty answer carries offset 0). Fails if the offset is 0 for a
/// non-empty payload or shorter than a record, or if the payload ends inside a record.
pub fn record_slices<'a>(
    record: &'static str,
    payload: &'a [u8],
    attribute_offset: u16,
    record_len: usize,
) -> Result<RecordSlices<'a>> {
    let stride = attribute_offset as usize * 8;
    if payload.is_empty() {
        return Ok(RecordSlices {
            rest: payload,
            stride: stride.max(1),
        });
    }
    if stride == 0 || stride < record_len {
        return Err(Error::BadAttributeOffset {
            record,
            offset: attribute_offset,
            need: record_len,
        });
    }
    let tail = payload.len() % stride;
    if tail != 0 && tail < record_len {
        return Err(Error::Truncated {
            what: record,
            need: record_len,
            got: tail,
        });
    }
    Ok(RecordSlices {
        rest: payload,
        stride,
    })
}

/// The records of a reassembled SA payload, parsed as `R`.
#[derive(Debug, Clone)]
pub struct Records<'a, R> {
    slices: RecordSlices<'a>,
    _record: PhantomData<fn() -> R>,
}

impl<R: Wire> Iterator for Records<'_, R> {
    type Item = Result<R>;
    fn next(&mut self) -> Option<Result<R>> {
        self.slices.next().map(R::parse)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.slices.size_hint()
    }
}

impl<R: Wire> ExactSizeIterator for Records<'_, R> {}

/// Walks the `R` records of a reassembled SA payload (see [`record_slices`]).
pub fn records<R: Wire>(payload: &[u8], attribute_offset: u16) -> Result<Records<'_, R>> {
    Ok(Records {
        slices: record_slices(R::NAME, payload, attribute_offset, R::LEN)?,
        _record: PhantomData,
    })
}

/// Lays `records` out as a table payload: each one padded to a multiple of 8 bytes. Returns
/// the attribute offset (0 when there is no record, as OpenSM answers) and the payload.
pub fn pack_records<R: Wire>(records: &[R]) -> Result<(u16, Vec<u8>)> {
    if records.is_empty() {
        return Ok((0, Vec::new()));
    }
    let offset = attribute_offset_for(R::LEN).ok_or(Error::BadAttributeOffset {
        record: R::NAME,
        offset: u16::MAX,
        need: R::LEN,
    })?;
    let stride = offset as usize * 8;
    let mut out = vec![0u8; stride * records.len()];
    for (r, chunk) in records.iter().zip(out.chunks_exact_mut(stride)) {
        r.emit(chunk)?;
    }
    Ok((offset, out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rmpp::{RmppFlags, RmppType};

    fn hex(s: &str) -> Vec<u8> {
        let digits: Vec<u8> = s
            .bytes()
            .filter(u8::is_ascii_hexdigit)
            .map(|c| (c as char).to_digit(16).unwrap() as u8)
            .collect();
        digits.chunks(2).map(|p| (p[0] << 4) | p[1]).collect()
    }

    fn full(s: &str) -> Vec<u8> {
        let mut v = hex(s);
        v.resize(LEN, 0);
        v
    }

    // ibsim net.2sw2path4hca with OpenSM 3.3.23 as SA; `saquery -d -d -d LR` from Switch1.
    // The request, and OpenSM's GetTableResp with twelve 8-byte LinkRecords. saquery prints
    // the answer only up to the length OpenSM sent (56 + 96 bytes): the rest is zero here.
    // OpenSM hands GetTableResp to the kernel with only the RMPP Active flag set (the kernel
    // segments it); ibsim's shim delivers it as is.
    const LR_REQ: &str = "0103 0212 0000 0000 0000 0000 1394 40ae 0020";
    const LR_RESP: &str = "
        0103 0292 0000 0000 0001 0000 1394 40ae 0020 0000 0000 0000 0000 0100 0000 0000
        0000 0000 0000 0000 0000 0000 0001 0000 0000 0000 0000 0000 0002 0101 0001 0000
        0001 0101 0002 0000 0001 0201 0005 0000 0001 0303 0003 0000 0001 0505 0003 0000
        0003 0101 0004 0000 0003 0201 0006 0000 0003 0303 0001 0000 0003 0505 0001 0000
        0004 0101 0003 0000 0005 0102 0001 0000 0006 0102 0003 0000";

    // Same fabric: `saquery -d -d -d NR 2` (NodeRecord of LID 2, component mask LID) and the
    // answer: one 112-byte NodeRecord, attribute offset 14.
    const NR_REQ: &str = "
        0103 0212 0000 0000 0000 0000 3b50 04f7 0011 0000 0000 0000 0000 0000 0000 0000
        0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0001 0002";
    const NR_RESP: &str = "
        0103 0292 0000 0000 0001 0000 3b50 04f7 0011 0000 0000 0000 0000 0100 0000 0000
        0000 0000 0000 0000 0000 0000 000e 0000 0000 0000 0000 0001 0002 0000 0101 0102
        0000 0000 0010 0000 0000 0000 0010 0000 0000 0000 0010 0001 0040 0000 0000 00a1
        0100 0000 4863 6131";

    // Same fabric: `saquery -d -d -d PR --slid 1 --dlid 2`: GetTable(PathRecord) matching
    // DLID and SLID (component mask 0x30), answered with one 64-byte PathRecord.
    const PR_REQ: &str = "
        0103 0212 0000 0000 0000 0000 5bd8 a35e 0035 0000 0000 0000 0000 0000 0000 0000
        0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0030 0000 0000 0000 0000
        0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000
        0002 0001";
    const PR_RESP: &str = "
        0103 0292 0000 0000 0001 0000 5bd8 a35e 0035 0000 0000 0000 0000 0100 0000 0000
        0000 0000 0000 0000 0000 0000 0008 0000 0000 0000 0000 0030 0000 0000 0000 0000
        fe80 0000 0000 0000 0000 0000 0010 0001 fe80 0000 0000 0000 0000 0000 0020 0000
        0002 0001 0000 0000 0080 ffff 0000 8383 92";

    // Same fabric: `saquery -d -d -d NR 999`: no such LID, an empty table: offset 0.
    const NR_EMPTY: &str = "
        0103 0292 0000 0000 0001 0000 12aa bf90 0011 0000 0000 0000 0000 0100 0000 0000
        0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0001";

    // Same fabric: `saquery -d -d -d -c`: Get(ClassPortInfo) answered by a plain GetResp.
    const CPI_RESP: &str = "
        0103 0281 0000 0000 0001 0000 4f85 79b3 0001 0000 0000 0000 0000 0000 0000 0000
        0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0102 2602 0016 bd10
        0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0001 8001 0000
        0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 8001 0000
        0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000
        0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000
        0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000
        0000 0000 0000 0000 2500 0000 0000 0000 00c0 f9fd 07";

    fn round_trip(b: &[u8]) -> Repr {
        let r = Repr::parse(b).unwrap();
        let mut out = [0xa5u8; LEN];
        r.emit(&mut out).unwrap();
        assert_eq!(&out[..], b);
        assert_eq!(r.to_bytes().unwrap().to_vec(), b);
        r
    }

    #[test]
    fn link_record_table() {
        let req = round_trip(&full(LR_REQ));
        assert_eq!(req.method, Method::GetTable);
        assert_eq!(
            req.attr_id,
            crate::attr::SaAttrId::LinkRecord.to_raw_value()
        );
        assert_eq!((req.component_mask, req.attribute_offset), (0, 0));
        assert!(!req.rmpp.is_active());
        assert_eq!(
            req,
            Repr::request(Method::GetTable, Tid(0x1394_40ae), 0x20, 0)
        );

        let b = full(LR_RESP);
        let r = round_trip(&b);
        assert_eq!(r.method, Method::GetTableResp);
        assert_eq!(r.status, MadStatus::OK);
        assert_eq!(r.tid, Tid(0x0001_0000_1394_40ae));
        assert_eq!(r.rmpp.rmpp_flags, RmppFlags::ACTIVE);
        assert_eq!(r.rmpp.rmpp_version, 0);
        assert_eq!((r.sm_key, r.component_mask), (0, 0));
        assert_eq!(r.attribute_offset, 1);
        // Not a proper one-segment transfer: the payload length is unknown.
        assert_eq!(r.payload().len(), DATA_LEN);
        let recs: Vec<&[u8]> = record_slices("LinkRecord", &b[56..152], 1, 8)
            .unwrap()
            .collect();
        assert_eq!(recs.len(), 12);
        assert_eq!(recs[0], &[0, 2, 1, 1, 0, 1, 0, 0]);
        assert_eq!(recs[11], &[0, 6, 1, 2, 0, 3, 0, 0]);
        assert_eq!(r.data.0[..96], b[56..152]);
    }

    #[test]
    fn node_record_single_answer() {
        let req = round_trip(&full(NR_REQ));
        assert_eq!(req.component_mask, 1);
        assert_eq!(req.data.0[..2], [0, 2]);
        let r = round_trip(&full(NR_RESP));
        assert_eq!(r.attr_id, crate::attr::SaAttrId::NodeRecord.to_raw_value());
        assert_eq!(r.attribute_offset, 14);
        assert_eq!(r.component_mask, 1);
        assert_eq!(&r.data.0[44..48], b"Hca1");
        let n = record_slices("NodeRecord", &r.data.0[..112], 14, 108)
            .unwrap()
            .count();
        assert_eq!(n, 1);
    }

    #[test]
    fn path_record() {
        let req = round_trip(&full(PR_REQ));
        assert_eq!(req.component_mask, 0x30);
        assert_eq!(
            req.attr_id,
            crate::attr::SaAttrId::PathRecord.to_raw_value()
        );
        assert_eq!(req.data.0[40..44], [0x00, 0x02, 0x00, 0x01]);
        let r = round_trip(&full(PR_RESP));
        assert_eq!(r.method, Method::GetTableResp);
        assert_eq!((r.attribute_offset, r.component_mask), (8, 0x30));
        assert_eq!(r.data.0[16..24], [0, 0, 0, 0, 0, 0x10, 0, 1], "DGID: Hca1");
        assert_eq!(r.data.0[40..44], [0x00, 0x02, 0x00, 0x01], "DLID 2, SLID 1");
        let n = record_slices("PathRecord", &r.data.0[..64], 8, 64)
            .unwrap()
            .count();
        assert_eq!(n, 1);
    }

    #[test]
    fn empty_table_and_get() {
        let r = round_trip(&full(NR_EMPTY));
        assert_eq!(r.attribute_offset, 0);
        assert_eq!(record_slices("NodeRecord", &[], 0, 108).unwrap().count(), 0);
        let r = round_trip(&full(CPI_RESP));
        assert_eq!(r.method, Method::GetResp);
        assert!(!r.rmpp.is_active());
        assert_eq!(r.attr_id, crate::attr::CLASS_PORT_INFO);
        assert_eq!(r.data.0[..4], [0x01, 0x02, 0x26, 0x02]);
    }

    #[test]
    fn one_segment_payload_length() {
        let mut r = Repr::parse(&full(LR_RESP)).unwrap();
        r.rmpp = rmpp::Repr::data(1, RmppFlags::FIRST | RmppFlags::LAST, 20 + 96);
        assert_eq!(r.payload().len(), 96);
        r.rmpp.data2 = 20;
        assert!(r.payload().is_empty());
        r.rmpp.data2 = 300;
        assert_eq!(r.payload().len(), DATA_LEN);
    }

    #[test]
    fn view_accessors() {
        let mut b = full(LR_RESP);
        let mut p = Packet::new_checked(&mut b[..]).unwrap();
        assert_eq!(p.get(field::ATTRIBUTE_OFFSET), 1);
        assert_eq!(p.get(mad::field::METHOD), Method::GetTableResp);
        assert!(p.rmpp().get(rmpp::field::RMPP_FLAGS).active());
        assert!(p.check_reserved().is_ok());
        p.set(field::SM_KEY, 0x0102_0304_0506_0708);
        p.set(field::COMPONENT_MASK, 0x30);
        p.rmpp_mut().set(rmpp::field::RMPP_TYPE, RmppType::Data);
        p.data_mut()[0] = 0xee;
        assert_eq!(p.data()[0], 0xee);
        assert_eq!(b[25], 1);
        assert_eq!(b[36..44], [1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(b[55], 0x30);
        b[46] = 0x80;
        assert!(matches!(
            Packet::new_checked(&b[..]).unwrap().check_reserved(),
            Err(Error::ReservedBitsSet { offset: 46, .. })
        ));
    }

    #[test]
    fn bad_input() {
        let b = full(LR_RESP);
        assert!(matches!(
            Repr::parse(&b[..255]),
            Err(Error::Truncated {
                need: 256,
                got: 255,
                ..
            })
        ));
        assert!(Packet::new_checked(&b[..100]).is_err());
        let mut v1 = b.clone();
        v1[2] = 1;
        assert_eq!(
            Repr::parse(&v1),
            Err(Error::BadClassVersion {
                class: 3,
                version: 1
            })
        );
        let mut smp = b.clone();
        smp[1] = 0x01;
        smp[2] = 1;
        assert_eq!(Repr::parse(&smp), Err(Error::UnsupportedClass(1)));
        let r = Repr::parse(&b).unwrap();
        let mut small = [0u8; 255];
        assert!(matches!(
            r.emit(&mut small),
            Err(Error::BufferTooSmall { need: 256, .. })
        ));
        assert!(r.emit_header(&mut small[..55]).is_err());
    }

    #[test]
    fn unknown_values_survive() {
        let mut b = full(LR_RESP);
        b[3] = 0x7e;
        b[5] = 0x42;
        b[25] = 9;
        let r = round_trip(&b);
        assert_eq!(r.method, Method::Unknown(0x7e));
        assert_eq!(r.rmpp.rmpp_type, RmppType::Unknown(9));
    }

    #[test]
    fn statuses() {
        assert_eq!(ERR_NO_RESOURCES, MadStatus(0x0100));
        assert_eq!(ERR_REQ_INVALID, MadStatus(0x0200));
        assert_eq!(ERR_NO_RECORDS, MadStatus(0x0300));
        assert_eq!(ERR_TOO_MANY_RECORDS, MadStatus(0x0400));
        assert_eq!(ERR_REQ_INVALID_GID, MadStatus(0x0500));
        assert_eq!(ERR_REQ_INSUFFICIENT_COMPONENTS, MadStatus(0x0600));
        assert_eq!(ERR_REQ_DENIED, MadStatus(0x0700));
        assert_eq!(
            MadStatus::from(SaStatus::PrioritySuggested),
            MadStatus(0x0800)
        );
        assert_eq!(
            SaStatus::from_mad_status(MadStatus(0x0300 | 0x1c)),
            Some(SaStatus::NoRecords)
        );
        assert_eq!(SaStatus::from_mad_status(MadStatus::INVALID_FIELD), None);
        let req = Repr::parse(&full(NR_REQ)).unwrap();
        let resp = req.response(ERR_NO_RECORDS);
        assert_eq!(resp.method, Method::GetTableResp);
        assert_eq!((resp.tid, resp.component_mask), (req.tid, 1));
        assert_eq!(resp.to_bytes().unwrap()[4..6], [0x03, 0x00]);
    }

    #[derive(Debug, Clone, Copy, PartialEq)]
    struct Rec6([u8; 6]);
    impl Wire for Rec6 {
        const NAME: &'static str = "Rec6";
        const LEN: usize = 6;
        fn parse(buf: &[u8]) -> Result<Self> {
            let b = buf.get(..6).ok_or(Error::Truncated {
                what: "Rec6",
                need: 6,
                got: buf.len(),
            })?;
            let mut a = [0u8; 6];
            a.copy_from_slice(b);
            Ok(Rec6(a))
        }
        fn emit(&self, buf: &mut [u8]) -> Result<()> {
            buf[..6].copy_from_slice(&self.0);
            Ok(())
        }
    }

    #[test]
    fn record_iteration() {
        let recs = [Rec6([1; 6]), Rec6([2; 6]), Rec6([3; 6])];
        let (offset, payload) = pack_records(&recs).unwrap();
        assert_eq!(offset, 1);
        assert_eq!(payload.len(), 24);
        assert_eq!(payload[6..8], [0, 0]);
        let back: Vec<Rec6> = records::<Rec6>(&payload, offset)
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(back, recs);
        // The last record's padding may be missing.
        assert_eq!(records::<Rec6>(&payload[..22], 1).unwrap().len(), 3);
        assert!(matches!(
            records::<Rec6>(&payload[..20], 1),
            Err(Error::Truncated {
                need: 6,
                got: 4,
                ..
            })
        ));
        assert_eq!(
            records::<Rec6>(&payload, 0).unwrap_err(),
            Error::BadAttributeOffset {
                record: "Rec6",
                offset: 0,
                need: 6
            }
        );
        assert!(matches!(
            record_slices("NodeRecord", &[0; 112], 13, 108),
            Err(Error::BadAttributeOffset { offset: 13, .. })
        ));
        assert_eq!(records::<Rec6>(&[], 0).unwrap().count(), 0);
        assert_eq!(pack_records::<Rec6>(&[]).unwrap(), (0, Vec::new()));
        assert_eq!(attribute_offset_for(108), Some(14));
        assert_eq!(attribute_offset_for(8 * 65536), None);
    }

    #[test]
    fn json() {
        let r = Repr::parse(&full(NR_RESP)).unwrap();
        let v = serde_json::to_value(r).unwrap();
        assert_eq!(v["method"], "GetTableResp");
        assert_eq!(v["attribute_offset"], 14);
        assert_eq!(v["rmpp"]["rmpp_flags"]["active"], true);
    }
}
