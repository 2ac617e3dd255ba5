//! The kernel's `ib_user_mad` message header and agent registration request, as bytes.
//!
//! Layout (host order unless noted): agent id u32 @0, status u32 @4, timeout_ms u32 @8,
//! retries u32 @12, length u32 @16, qpn (BE u32) @20, qkey (BE u32) @24, lid (BE u16) @28,
//! sl @30, path_bits @31, grh_present @32, gid_index @33, hop_limit @34, traffic_class @35,
//! gid[16] @36, flow_label (BE u32) @52, then with ENABLE_PKEY pkey_index u16 @56 and
//! reserved[6] @58. Without ENABLE_PKEY (and always under libumad2sim) the header is the
//! first 56 bytes.

use std::ops::Range;

/// The header without a P_Key index (`ib_user_mad_hdr_old`).
pub(super) const HDR_LEN_OLD: usize = 56;
/// The header after ENABLE_PKEY.
pub(super) const HDR_LEN_PKEY: usize = 64;
/// Bytes of a MAD header: anything shorter is not a MAD.
pub(super) const MAD_HDR_LEN: usize = 24;
/// The well-known Q_Key of QP1.
pub(super) const QP1_QKEY: u32 = 0x8001_0000;

mod field {
    use super::Range;
    pub(super) const AGENT: Range<usize> = 0..4;
    pub(super) const STATUS: Range<usize> = 4..8;
    pub(super) const TIMEOUT_MS: Range<usize> = 8..12;
    pub(super) const RETRIES: Range<usize> = 12..16;
    pub(super) const LENGTH: Range<usize> = 16..20;
    pub(super) const QPN: Range<usize> = 20..24;
    pub(super) const QKEY: Range<usize> = 24..28;
    pub(super) const LID: Range<usize> = 28..30;
    pub(super) const SL: usize = 30;
    pub(super) const PKEY_INDEX: Range<usize> = 56..58;

    // Registration request.
    pub(super) const REG_METHOD_MASK: Range<usize> = 4..20;
    pub(super) const REG_QPN: usize = 20;
    pub(super) const REG_CLASS: usize = 21;
    pub(super) const REG_CLASS_VERSION: usize = 22;
    pub(super) const REG_RMPP_VERSION: usize = 26;
}

fn u32_ne(b: &[u8], r: Range<usize>) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[r]);
    u32::from_ne_bytes(a)
}

fn u32_be(b: &[u8], r: Range<usize>) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[r]);
    u32::from_be_bytes(a)
}

/// What goes into the header of a MAD we send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SendHdr {
    pub agent: u32,
    /// 0 for responses and unsolicited MADs; non-zero for requests (the kernel matches the
    /// response to the request only then).
    pub timeout_ms: u32,
    pub retries: u32,
    pub qpn: u32,
    pub qkey: u32,
    pub dlid: u16,
    pub sl: u8,
    pub pkey_index: u16,
}

/// Writes a header for `mad_len` MAD bytes into `out` (`hdr_len` bytes: 56 or 64).
pub(super) fn emit_send(h: &SendHdr, hdr_len: usize, mad_len: usize, out: &mut [u8]) {
    let out = &mut out[..hdr_len];
    out.fill(0);
    out[field::AGENT].copy_from_slice(&h.agent.to_ne_bytes());
    out[field::TIMEOUT_MS].copy_from_slice(&h.timeout_ms.to_ne_bytes());
    out[field::RETRIES].copy_from_slice(&h.retries.to_ne_bytes());
    let len = u32::try_from(hdr_len + mad_len).unwrap_or(u32::MAX);
    out[field::LENGTH].copy_from_slice(&len.to_ne_bytes());
    out[field::QPN].copy_from_slice(&h.qpn.to_be_bytes());
    out[field::QKEY].copy_from_slice(&h.qkey.to_be_bytes());
    out[field::LID].copy_from_slice(&h.dlid.to_be_bytes());
    out[field::SL] = h.sl;
    if hdr_len >= HDR_LEN_PKEY {
        out[field::PKEY_INDEX].copy_from_slice(&h.pkey_index.to_ne_bytes());
    }
}

/// The header of a received message, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct RecvHdr {
    pub agent: u32,
    /// 0, or an errno such as 110 (ETIMEDOUT: a request the kernel gave up on).
    pub status: u32,
    /// The header's length field (header + MAD), as the kernel reports it.
    pub length: u32,
    /// Source QP.
    pub qpn: u32,
    /// Source LID.
    pub slid: u16,
    pub sl: u8,
    pub pkey_index: u16,
}

/// Why a received buffer was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RecvError {
    /// Fewer bytes than a header.
    ShortHeader { got: usize, need: usize },
}

/// Parses the header at the front of `buf` (`hdr_len` bytes: 56 or 64).
pub(super) fn parse_recv(buf: &[u8], hdr_len: usize) -> Result<RecvHdr, RecvError> {
    if buf.len() < hdr_len || hdr_len < HDR_LEN_OLD {
        return Err(RecvError::ShortHeader {
            got: buf.len(),
            need: hdr_len.max(HDR_LEN_OLD),
        });
    }
    let pkey_index = if hdr_len >= HDR_LEN_PKEY {
        u16::from_ne_bytes([buf[56], buf[57]])
    } else {
        0
    };
    Ok(RecvHdr {
        agent: u32_ne(buf, field::AGENT),
        status: u32_ne(buf, field::STATUS),
        length: u32_ne(buf, field::LENGTH),
        qpn: u32_be(buf, field::QPN) & 0x00FF_FFFF,
        slid: u16::from_be_bytes([buf[field::LID.start], buf[field::LID.start + 1]]),
        sl: buf[field::SL],
        pkey_index,
    })
}

/// The header's length field of a message the kernel could not fit in our buffer, if sane.
pub(super) fn wanted_len(buf: &[u8], hdr_len: usize) -> Option<usize> {
    let h = parse_recv(buf, hdr_len).ok()?;
    let n = h.length as usize;
    (n > hdr_len).then_some(n)
}

/// An agent registration request (`ib_user_mad_reg_req`, 28 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct AgentReq {
    /// 0 for the SMI classes (QP0), 1 for GSI classes (QP1).
    pub qpn: u8,
    pub mgmt_class: u8,
    pub class_version: u8,
    /// 1: the kernel does RMPP (segmentation, ACKs) for this agent.
    pub rmpp_version: u8,
    /// Methods whose unsolicited MADs this agent receives.
    pub methods: &'static [u8],
}

impl AgentReq {
    pub(super) fn to_bytes(self) -> [u8; 28] {
        let mut b = [0u8; 28];
        // The kernel's method mask is an array of longs; bit m of the mask is bit m % BITS
        // of long m / BITS, each long in host order.
        let mut words = [0u64; 2];
        for &m in self.methods {
            let m = (m & 0x7F) as usize;
            words[m / 64] |= 1 << (m % 64);
        }
        let mask = &mut b[field::REG_METHOD_MASK];
        if cfg!(target_pointer_width = "64") {
            mask[..8].copy_from_slice(&words[0].to_ne_bytes());
            mask[8..].copy_from_slice(&words[1].to_ne_bytes());
        } else {
            for (i, w) in words
                .iter()
                .flat_map(|w| [*w as u32, (*w >> 32) as u32])
                .enumerate()
            {
                mask[i * 4..i * 4 + 4].copy_from_slice(&w.to_ne_bytes());
            }
        }
        b[field::REG_QPN] = self.qpn;
        b[field::REG_CLASS] = self.mgmt_class;
        b[field::REG_CLASS_VERSION] = self.class_version;
        b[field::REG_RMPP_VERSION] = self.rmpp_version;
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn send_header_layout() {
        let h = SendHdr {
            agent: 3,
            timeout_ms: 50,
            retries: 0,
            qpn: 1,
            qkey: QP1_QKEY,
            dlid: 0x1234,
            sl: 2,
            pkey_index: 7,
        };
        let mut b = [0xa5u8; 64];
        emit_send(&h, HDR_LEN_PKEY, 256, &mut b);
        assert_eq!(&b[0..4], &3u32.to_ne_bytes());
        assert_eq!(&b[4..8], &[0; 4]);
        assert_eq!(&b[8..12], &50u32.to_ne_bytes());
        assert_eq!(&b[16..20], &320u32.to_ne_bytes());
        assert_eq!(&b[20..24], &[0, 0, 0, 1]);
        assert_eq!(&b[24..28], &[0x80, 0x01, 0, 0]);
        assert_eq!(&b[28..30], &[0x12, 0x34]);
        assert_eq!(b[30], 2);
        assert_eq!(&b[56..58], &7u16.to_ne_bytes());
        assert_eq!(&b[58..64], &[0; 6]);
        // The old form never touches bytes past 56.
        let mut b = [0xa5u8; 64];
        emit_send(&h, HDR_LEN_OLD, 256, &mut b);
        assert_eq!(&b[16..20], &312u32.to_ne_bytes());
        assert_eq!(&b[56..64], &[0xa5; 8]);
    }

    #[test]
    fn recv_header_round_trip_and_short_input() {
        let h = SendHdr {
            agent: 9,
            timeout_ms: 0,
            retries: 0,
            qpn: 0x12_3456,
            qkey: 0,
            dlid: 77,
            sl: 0,
            pkey_index: 0,
        };
        let mut b = [0u8; 64];
        emit_send(&h, HDR_LEN_OLD, 256, &mut b);
        b[4..8].copy_from_slice(&110u32.to_ne_bytes());
        let r = parse_recv(&b[..56], HDR_LEN_OLD).unwrap();
        assert_eq!(r.agent, 9);
        assert_eq!(r.status, 110);
        assert_eq!(r.qpn, 0x12_3456);
        assert_eq!(r.slid, 77);
        assert_eq!(r.length, 312);
        assert_eq!(wanted_len(&b, HDR_LEN_OLD), Some(312));
        assert!(parse_recv(&b[..55], HDR_LEN_OLD).is_err());
        assert!(parse_recv(&b[..60], HDR_LEN_PKEY).is_err());
        assert!(parse_recv(&[], HDR_LEN_OLD).is_err());
    }

    #[test]
    fn registration_request_layout() {
        let r = AgentReq {
            qpn: 1,
            mgmt_class: 0x03,
            class_version: 2,
            rmpp_version: 1,
            methods: &[0x01, 0x02, 0x12, 0x15],
        };
        let b = r.to_bytes();
        assert_eq!(&b[0..4], &[0; 4]);
        let mut mask = [0u8; 16];
        mask[0] = 0b0000_0110;
        mask[2] = 0b0010_0100;
        if cfg!(target_endian = "little") {
            assert_eq!(&b[4..20], &mask);
        }
        assert_eq!(b[20..27], [1, 0x03, 2, 0, 0, 0, 1]);
        assert_eq!(b[27], 0);
    }
}
