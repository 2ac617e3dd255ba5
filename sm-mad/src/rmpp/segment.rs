//! Cutting a payload into DATA segments.

use super::{HEADER_END, RmppFlags, SEGMENT_PAYLOAD};
use crate::{Error, MAD_LEN, Result, RmppError, sa};

/// A payload ready to go out as RMPP DATA segments. Each segment is the header template
/// (MAD header, RMPP header, class header) followed by `256 - header_len` bytes of payload,
/// the last one zero-padded. Segments are rendered on demand, so retransmissions cost no
/// stored copies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segmenter {
    header: [u8; MAD_LEN],
    header_len: usize,
    payload: Vec<u8>,
    count: u32,
}

impl Segmenter {
    /// A transfer of `payload` behind the first `header.len()` bytes of `header` (at least
    /// the 36 bytes up to the end of the RMPP header, less than 256). The template's RMPP
    /// response time is kept; the rest of its RMPP header is replaced per segment.
    pub fn new(header: &[u8], payload: Vec<u8>) -> Result<Segmenter> {
        let header_len = header.len();
        if !(HEADER_END..MAD_LEN).contains(&header_len) {
            return Err(Error::InvalidField {
                what: "RMPP segment",
                field: "header_len",
                value: header_len as u64,
            });
        }
        let per = MAD_LEN - header_len;
        let count = u32::try_from(payload.len().div_ceil(per).max(1))
            .map_err(|_| RmppError::TooManySegments(u32::MAX))?;
        // payload_length of the first segment must fit 32 bits too.
        u32::try_from(count as u64 * SEGMENT_PAYLOAD as u64)
            .map_err(|_| RmppError::TooManySegments(count))?;
        let mut h = [0u8; MAD_LEN];
        h[..header_len].copy_from_slice(header);
        Ok(Segmenter {
            header: h,
            header_len,
            payload,
            count,
        })
    }

    /// An SA transfer: `template`'s MAD and SA headers (its data is ignored) and the records
    /// laid out `attribute_offset * 8` bytes apart.
    pub fn sa(template: &sa::Repr, payload: Vec<u8>) -> Result<Segmenter> {
        let mut h = [0u8; sa::HEADER_LEN];
        template.emit_header(&mut h)?;
        Segmenter::new(&h, payload)
    }

    /// Number of DATA segments (at least 1: an empty payload still sends its header).
    pub fn count(&self) -> u32 {
        self.count
    }

    /// The header template.
    pub fn header(&self) -> &[u8] {
        &self.header[..self.header_len]
    }

    /// The whole payload.
    pub fn payload(&self) -> &[u8] {
        &self.payload
    }

    /// Pad bytes after the payload in the last segment.
    fn pad(&self) -> usize {
        self.count as usize * (MAD_LEN - self.header_len) - self.payload.len()
    }

    /// The `payload_length` of the first segment: every segment's class header and data,
    /// less the pad.
    pub fn payload_length(&self) -> u32 {
        (self.count as usize * SEGMENT_PAYLOAD - self.pad()) as u32
    }

    /// DATA segment `n` (1-based).
    pub fn segment(&self, n: u32) -> Result<[u8; MAD_LEN]> {
        if n == 0 || n > self.count {
            return Err(RmppError::TooManySegments(n).into());
        }
        let mut out = self.header;
        let per = MAD_LEN - self.header_len;
        let start = (n as usize - 1) * per;
        let chunk = self
            .payload
            .get(start..(start + per).min(self.payload.len()))
            .unwrap_or(&[]);
        out[self.header_len..self.header_len + chunk.len()].copy_from_slice(chunk);
        let mut flags = RmppFlags::NONE;
        let mut length = 0;
        if n == 1 {
            flags = flags | RmppFlags::FIRST;
            length = self.payload_length();
        }
        if n == self.count {
            flags = flags | RmppFlags::LAST;
            length = (SEGMENT_PAYLOAD - self.pad()) as u32;
        }
        let resp_time = super::Repr::parse_mad(&out)?.rmpp_resp_time;
        super::Repr {
            rmpp_resp_time: resp_time,
            ..super::Repr::data(n, flags, length)
        }
        .emit_mad(&mut out)?;
        Ok(out)
    }

    /// Every segment, in order.
    pub fn segments(&self) -> impl Iterator<Item = [u8; MAD_LEN]> + '_ {
        (1..=self.count).filter_map(|n| self.segment(n).ok())
    }
}

/// The DATA segments of an SA transfer: `template`'s MAD and SA headers, `payload` the
/// records laid out `attribute_offset * 8` bytes apart (see [`sa::pack_records`]).
pub fn segment(template: &sa::Repr, payload: &[u8]) -> Result<Vec<[u8; MAD_LEN]>> {
    let s = Segmenter::sa(template, payload.to_vec())?;
    Ok(s.segments().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::Method;
    use crate::rmpp::{Repr, RmppStatus, RmppType};
    use crate::{Tid, attr};

    fn template() -> sa::Repr {
        let mut t = sa::Repr::request(Method::GetTable, Tid(0x1122_3344), attr::NODE_INFO, 0x5)
            .response(crate::MadStatus::OK);
        t.attribute_offset = 7;
        t.component_mask = 0x8000_0000_0000_0001;
        t.rmpp.rmpp_resp_time = 14;
        t
    }

    // The 56 header bytes every segment repeats, RMPP header (bytes 24..36) aside.
    const HEAD: [u8; 56] = [
        0x01, 0x03, 0x02, 0x92, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x11, 0x22, 0x33,
        0x44, 0x00, 0x11, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, //
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, //
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x80, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x01,
    ];

    fn expect(rmpp: [u8; 12], data: &[u8]) -> [u8; 256] {
        let mut m = [0u8; 256];
        m[..56].copy_from_slice(&HEAD);
        m[24..36].copy_from_slice(&rmpp);
        m[56..56 + data.len()].copy_from_slice(data);
        m
    }

    #[test]
    fn three_segments_byte_exact() {
        // 450 bytes: 200 + 200 + 50; pad 150; first announces 3 * 220 - 150 = 510,
        // last 220 - 150 = 70.
        let payload: Vec<u8> = (0..450u32).map(|i| (i * 7 + 3) as u8).collect();
        let segs = segment(&template(), &payload).unwrap();
        assert_eq!(segs.len(), 3);
        let want = [
            expect(
                [1, 1, 0x73, 0, 0, 0, 0, 1, 0, 0, 0x01, 0xfe],
                &payload[..200],
            ),
            expect([1, 1, 0x71, 0, 0, 0, 0, 2, 0, 0, 0, 0], &payload[200..400]),
            expect([1, 1, 0x75, 0, 0, 0, 0, 3, 0, 0, 0, 70], &payload[400..]),
        ];
        for (got, want) in segs.iter().zip(want.iter()) {
            assert_eq!(got[..], want[..]);
        }
    }

    #[test]
    fn exact_multiple_has_no_pad() {
        let s = Segmenter::sa(&template(), vec![0xab; 400]).unwrap();
        assert_eq!(s.count(), 2);
        assert_eq!(s.payload_length(), 440);
        let last = Repr::parse_mad(&s.segment(2).unwrap()).unwrap();
        assert_eq!(last.payload_length(), 220);
        assert_eq!(last.rmpp_flags, RmppFlags::ACTIVE | RmppFlags::LAST);
        assert!(s.segment(3).is_err());
        assert!(s.segment(0).is_err());
    }

    #[test]
    fn empty_and_single() {
        // No record: one segment announcing the SA header alone.
        let segs = segment(&template(), &[]).unwrap();
        assert_eq!(segs.len(), 1);
        assert_eq!(
            segs[0][..],
            expect([1, 1, 0x77, 0, 0, 0, 0, 1, 0, 0, 0, 20], &[])[..]
        );
        let one = segment(&template(), &[9; 112]).unwrap();
        let r = sa::Repr::parse(&one[0]).unwrap();
        assert_eq!(r.rmpp.payload_length(), 132);
        assert_eq!(r.rmpp.rmpp_status, RmppStatus::Normal);
        assert_eq!(r.rmpp.rmpp_type, RmppType::Data);
        assert_eq!(r.payload(), &[9; 112][..]);
    }

    #[test]
    fn what_the_kernel_would_send_for_opensm() {
        // OpenSM's GetTableResp(LinkRecord) as captured in sa.rs (12 records, offset 1),
        // segmented: only the RMPP header differs.
        let mut t = sa::Repr::request(Method::GetTableResp, Tid(0x1_0000_1394_40ae), 0x20, 0);
        t.rmpp.rmpp_flags = RmppFlags::ACTIVE;
        t.attribute_offset = 1;
        let segs = segment(&t, &[0x5a; 96]).unwrap();
        assert_eq!(segs.len(), 1);
        assert_eq!(segs[0][24..36], [1, 1, 0x07, 0, 0, 0, 0, 1, 0, 0, 0, 116]);
    }

    #[test]
    fn bad_header_len() {
        assert!(Segmenter::new(&[0; 35], vec![]).is_err());
        assert!(Segmenter::new(&[0; 256], vec![]).is_err());
        let s = Segmenter::new(&[0; 36], vec![1; 221]).unwrap();
        assert_eq!(s.count(), 2);
        assert_eq!(s.payload_length(), 221);
    }
}
