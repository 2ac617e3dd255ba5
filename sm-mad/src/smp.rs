//! Subnet management packets (IBA 14.2.1): LID-routed (class 0x01) and directed-route
//! (class 0x81). 256 bytes: the MAD header, M_Key, the DR addressing fields, 64 bytes of
//! attribute data, and for directed route the initial and return paths.

use crate::bits::packet_view;
use crate::bits::{Bytes, Field, set_bits};
use crate::mad::{self, BASE_VERSION, MadStatus, Method, MgmtClass};
use crate::{Error, Lid, MAD_LEN, Result, Tid, Wire};

/// Length of every SMP.
pub const LEN: usize = MAD_LEN;
/// Length of the attribute data field.
pub const DATA_LEN: usize = 64;
/// Longest directed route: the path arrays hold 64 bytes and byte 0 is unused.
pub const MAX_HOPS: u8 = 63;

/// Bit layout of the SMP beyond the common header (which `mad::field` describes).
pub mod field {
    use super::*;
    /// Directed route: direction bit, the most significant bit of the status field.
    pub const DIRECTION: Field<bool> = Field::new("d", 32, 1);
    /// Directed route: the 15-bit status that follows the direction bit.
    pub const DR_STATUS: Field<u16> = Field::new("status", 33, 15);
    /// Directed route: the hop pointer (class-specific byte 6).
    pub const HOP_POINTER: Field<u8> = Field::new("hop_pointer", 48, 8);
    /// Directed route: the hop count (class-specific byte 7).
    pub const HOP_COUNT: Field<u8> = Field::new("hop_count", 56, 8);
    /// M_Key.
    pub const M_KEY: Field<u64> = Field::new("m_key", 192, 64);
    /// Directed route: the LID of the LID-routed part at the requester's end.
    pub const DR_SLID: Field<Lid> = Field::new("dr_slid", 256, 16);
    /// Directed route: the LID of the LID-routed part at the responder's end.
    pub const DR_DLID: Field<Lid> = Field::new("dr_dlid", 272, 16);
    /// The attribute data.
    pub const DATA: core::ops::Range<usize> = 64..128;
    /// Directed route: the outbound path, one exit port per hop from byte 1.
    pub const INITIAL_PATH: core::ops::Range<usize> = 128..192;
    /// Directed route: the return path, filled in hop by hop.
    pub const RETURN_PATH: core::ops::Range<usize> = 192..256;

    /// Every field of a LID-routed SMP as (name, bit offset, bit width); all other bits
    /// (the class-specific word, the header's reserved word, bytes 32..64 and 128..256) are
    /// reserved.
    pub const ALL_LID: &[(&str, usize, usize)] = &[
        ("base_version", 0, 8),
        ("mgmt_class", 8, 8),
        ("class_version", 16, 8),
        ("method", 24, 8),
        ("status", 32, 16),
        ("tid", 64, 64),
        ("attr_id", 128, 16),
        ("attr_mod", 160, 32),
        ("m_key", 192, 64),
        ("data", 512, 512),
    ];

    /// Every field of a directed-route SMP; all other bits (the header's reserved word and
    /// bytes 36..64) are reserved.
    pub const ALL_DIRECTED: &[(&str, usize, usize)] = &[
        ("base_version", 0, 8),
        ("mgmt_class", 8, 8),
        ("class_version", 16, 8),
        ("method", 24, 8),
        ("d", 32, 1),
        ("status", 33, 15),
        ("hop_pointer", 48, 8),
        ("hop_count", 56, 8),
        ("tid", 64, 64),
        ("attr_id", 128, 16),
        ("attr_mod", 160, 32),
        ("m_key", 192, 64),
        ("dr_slid", 256, 16),
        ("dr_dlid", 272, 16),
        ("data", 512, 512),
        ("initial_path", 1024, 512),
        ("return_path", 1536, 512),
    ];
}

packet_view! {
    /// Zero-copy view over an SMP.
    view "SMP", LEN
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Reads one field (of `mad::field` or `smp::field`).
    #[inline]
    pub fn get<V: crate::WireValue>(&self, f: Field<V>) -> V {
        f.get(self.buffer.as_ref())
    }

    /// Class 0x81.
    pub fn is_directed(&self) -> bool {
        self.get(mad::field::MGMT_CLASS) == MgmtClass::SubnDirected
    }

    /// The 64-byte attribute data.
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::DATA]
    }

    /// The initial path (directed route; meaningless for LID-routed SMPs).
    pub fn initial_path(&self) -> &[u8] {
        &self.buffer.as_ref()[field::INITIAL_PATH]
    }

    /// The return path (directed route).
    pub fn return_path(&self) -> &[u8] {
        &self.buffer.as_ref()[field::RETURN_PATH]
    }

    /// Fails on the first reserved bit that is set (the layout follows the class byte).
    pub fn check_reserved(&self) -> Result<()> {
        let fields = if self.is_directed() {
            field::ALL_DIRECTED
        } else {
            field::ALL_LID
        };
        crate::bits::check_reserved("SMP", self.buffer.as_ref(), LEN, fields)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Writes one field.
    #[inline]
    pub fn set<V: crate::WireValue>(&mut self, f: Field<V>, v: V) {
        f.set(self.buffer.as_mut(), v)
    }

    /// The attribute data, writable.
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::DATA]
    }

    /// The initial path, writable.
    pub fn initial_path_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::INITIAL_PATH]
    }

    /// The return path, writable.
    pub fn return_path_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::RETURN_PATH]
    }
}

/// An SMP is a whole MAD, so a view of one needs no length check.
impl<'a> From<&'a [u8; LEN]> for Packet<&'a [u8; LEN]> {
    fn from(mad: &'a [u8; LEN]) -> Self {
        Packet::new_unchecked(mad)
    }
}

/// An SMP is a whole MAD, so a view of one needs no length check.
impl<'a> From<&'a mut [u8; LEN]> for Packet<&'a mut [u8; LEN]> {
    fn from(mad: &'a mut [u8; LEN]) -> Self {
        Packet::new_unchecked(mad)
    }
}

/// The directed-route part of an SMP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct Directed {
    /// The D bit: false on the way out, true on the way back.
    pub direction: bool,
    pub hop_pointer: u8,
    pub hop_count: u8,
    pub dr_slid: Lid,
    pub dr_dlid: Lid,
    pub initial_path: Bytes<64>,
    pub return_path: Bytes<64>,
}

impl Directed {
    /// A purely directed route along `ports` (exit port per hop), permissive at both ends.
    pub fn along(ports: &[u8]) -> Result<Directed> {
        if ports.len() > MAX_HOPS as usize {
            return Err(Error::HopCountTooLarge(ports.len().min(255) as u8));
        }
        let mut initial_path = [0u8; 64];
        initial_path[1..=ports.len()].copy_from_slice(ports);
        Ok(Directed {
            direction: false,
            hop_pointer: 0,
            hop_count: ports.len() as u8,
            dr_slid: Lid::PERMISSIVE,
            dr_dlid: Lid::PERMISSIVE,
            initial_path: Bytes(initial_path),
            return_path: Bytes([0; 64]),
        })
    }

    /// The exit ports of the initial path, hop 1 first.
    pub fn path(&self) -> &[u8] {
        &self.initial_path.0[1..=self.hop_count.min(MAX_HOPS) as usize]
    }
}

/// How an SMP is routed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "routing", rename_all = "snake_case")]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum Route {
    /// Class 0x01: routed by the destination LID through the forwarding tables.
    Lid,
    /// Class 0x81: routed port by port.
    Directed(Directed),
}

/// An SMP. For directed route, `status` is the 15 bits after the D bit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct Repr {
    pub method: Method,
    pub status: MadStatus,
    pub tid: Tid,
    pub attr_id: u16,
    pub attr_mod: u32,
    pub m_key: u64,
    #[serde(flatten)]
    pub route: Route,
    pub data: Bytes<64>,
}

impl Repr {
    /// A request with empty data.
    pub fn request(method: Method, tid: Tid, attr_id: u16, attr_mod: u32, route: Route) -> Repr {
        Repr {
            method,
            status: MadStatus::OK,
            tid,
            attr_id,
            attr_mod,
            m_key: 0,
            route,
            data: Bytes([0; 64]),
        }
    }

    /// A directed-route Get along `ports`.
    pub fn dr_get(tid: Tid, attr_id: u16, attr_mod: u32, ports: &[u8]) -> Result<Repr> {
        Ok(Repr::request(
            Method::Get,
            tid,
            attr_id,
            attr_mod,
            Route::Directed(Directed::along(ports)?),
        ))
    }

    /// The management class this SMP travels in.
    pub fn class(&self) -> MgmtClass {
        match self.route {
            Route::Lid => MgmtClass::SubnLid,
            Route::Directed(_) => MgmtClass::SubnDirected,
        }
    }

    /// Decodes the attribute data as `A`.
    pub fn attribute<A: Wire>(&self) -> Result<A> {
        A::parse(&self.data.0)
    }

    /// Replaces the attribute data with `a` (the rest of the 64 bytes zeroed).
    pub fn set_attribute<A: Wire>(&mut self, a: &A) -> Result<()> {
        self.data = Bytes([0; 64]);
        a.emit(&mut self.data.0)
    }

    /// Parses an SMP from a 256-byte buffer.
    pub fn parse(buf: &[u8]) -> Result<Repr> {
        // A fixed-size array from here on: every offset below is checked at compile time.
        let Some(buf) = buf.first_chunk::<LEN>() else {
            return Err(Error::Truncated {
                what: "SMP",
                need: LEN,
                got: buf.len(),
            });
        };
        let hdr = mad::Repr::parse(buf)?;
        let (status, route) = match hdr.mgmt_class {
            MgmtClass::SubnDirected => {
                let hop_count = field::HOP_COUNT.get(buf);
                if hop_count > MAX_HOPS {
                    return Err(Error::HopCountTooLarge(hop_count));
                }
                (
                    MadStatus(field::DR_STATUS.get(buf)),
                    Route::Directed(Directed {
                        direction: field::DIRECTION.get(buf),
                        hop_pointer: field::HOP_POINTER.get(buf),
                        hop_count,
                        dr_slid: field::DR_SLID.get(buf),
                        dr_dlid: field::DR_DLID.get(buf),
                        initial_path: Bytes(chunk(buf, field::INITIAL_PATH.start)),
                        return_path: Bytes(chunk(buf, field::RETURN_PATH.start)),
                    }),
                )
            }
            MgmtClass::SubnLid => (hdr.status, Route::Lid),
            other => return Err(Error::UnsupportedClass(other.to_raw_value())),
        };
        Ok(Repr {
            method: hdr.method,
            status,
            tid: hdr.tid,
            attr_id: hdr.attr_id,
            attr_mod: hdr.attr_mod,
            m_key: field::M_KEY.get(buf),
            route,
            data: Bytes(chunk(buf, field::DATA.start)),
        })
    }

    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }

    /// Writes the SMP into the first 256 bytes of `buf`; reserved bytes are zeroed.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let got = buf.len();
        let Some(buf) = buf.first_chunk_mut::<LEN>() else {
            return Err(Error::BufferTooSmall {
                what: "SMP",
                need: LEN,
                got,
            });
        };
        let (status, class_specific) = match &self.route {
            Route::Lid => (self.status, 0),
            Route::Directed(d) => {
                if d.hop_count > MAX_HOPS {
                    return Err(Error::HopCountTooLarge(d.hop_count));
                }
                (
                    MadStatus(((d.direction as u16) << 15) | (self.status.0 & 0x7fff)),
                    u16::from_be_bytes([d.hop_pointer, d.hop_count]),
                )
            }
        };
        // Each byte is written once: the header (with its reserved word), M_Key, the
        // DR LIDs and reserved bytes 32..64, the data, the paths or their zeroes.
        mad::Repr {
            base_version: BASE_VERSION,
            mgmt_class: self.class(),
            class_version: 1,
            method: self.method,
            status,
            class_specific,
            tid: self.tid,
            attr_id: self.attr_id,
            attr_mod: self.attr_mod,
        }
        .emit(buf)?;
        field::M_KEY.set(buf, self.m_key);
        buf[32..field::DATA.start].fill(0);
        buf[field::DATA].copy_from_slice(&self.data.0);
        match &self.route {
            Route::Directed(d) => {
                field::DR_SLID.set(buf, d.dr_slid);
                field::DR_DLID.set(buf, d.dr_dlid);
                buf[field::INITIAL_PATH].copy_from_slice(&d.initial_path.0);
                buf[field::RETURN_PATH].copy_from_slice(&d.return_path.0);
            }
            Route::Lid => buf[field::INITIAL_PATH.start..].fill(0),
        }
        Ok(())
    }

    /// Emits into a fresh 256-byte array.
    pub fn to_bytes(&self) -> Result<[u8; LEN]> {
        let mut b = [0u8; LEN];
        self.emit(&mut b)?;
        Ok(b)
    }
}

/// `N` bytes of an SMP from `start` (a constant wherever this is inlined).
#[inline(always)]
fn chunk<const N: usize>(buf: &[u8; LEN], start: usize) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&buf[start..start + N]);
    out
}

/// Sets the direction bit of a raw directed-route SMP in place (used when turning a
/// request into its response without a full re-encode).
pub fn set_direction(buf: &mut [u8], returning: bool) -> Result<()> {
    if buf.len() < LEN {
        return Err(Error::Truncated {
            what: "SMP",
            need: LEN,
            got: buf.len(),
        });
    }
    set_bits(buf, 32, 1, returning as u64);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node_info;

    fn hex(s: &str) -> Vec<u8> {
        let digits: Vec<u8> = s
            .bytes()
            .filter(u8::is_ascii_hexdigit)
            .map(|c| (c as char).to_digit(16).unwrap() as u8)
            .collect();
        digits.chunks(2).map(|p| (p[0] << 4) | p[1]).collect()
    }

    // `smpquery -D nodeinfo 0` on ibsim's net.2sw2path4hca: the request as libibmad sent it
    // and the response ibsim returned.
    const REQ: &str =
        "0181 0101 0000 0000 0000 0000 512c d29a 0011 0000 0000 0000 0000 0000 0000 0000
        ffff ffff";
    const RESP: &str =
        "0181 0181 8000 0000 0000 0001 512c d29a 0011 0000 0000 0000 0000 0000 0000 0000
        ffff ffff 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000
        0101 0208 0000 0000 0020 0000 0000 0000 0020 0000 0000 0000 0020 0000 0008 0000
        0000 00a1";

    fn full(s: &str) -> Vec<u8> {
        let mut v = hex(s);
        v.resize(256, 0);
        v
    }

    #[test]
    fn dr_request() {
        let b = full(REQ);
        let r = Repr::parse(&b).unwrap();
        assert_eq!(r.method, Method::Get);
        assert_eq!(r.attr_id, crate::attr::NODE_INFO);
        let Route::Directed(d) = r.route else {
            panic!("not directed")
        };
        assert!(!d.direction);
        assert_eq!((d.hop_pointer, d.hop_count), (0, 0));
        assert_eq!((d.dr_slid, d.dr_dlid), (Lid::PERMISSIVE, Lid::PERMISSIVE));
        let mut out = [0xa5u8; 256];
        r.emit(&mut out).unwrap();
        assert_eq!(&out[..], &b[..]);
        assert_eq!(Repr::dr_get(Tid(0x512c_d29a), 0x11, 0, &[]).unwrap(), r);
    }

    #[test]
    fn dr_response_with_node_info() {
        let b = full(RESP);
        let r = Repr::parse(&b).unwrap();
        assert_eq!(r.method, Method::GetResp);
        assert_eq!(r.status, MadStatus::OK);
        assert!(matches!(r.route, Route::Directed(d) if d.direction));
        let ni: node_info::Repr = r.attribute().unwrap();
        assert_eq!(ni.node_type, node_info::NodeType::Switch);
        assert_eq!(ni.num_ports, 8);
        assert_eq!(r.to_bytes().unwrap().to_vec(), b);
    }

    #[test]
    fn paths() {
        let d = Directed::along(&[1, 3, 5]).unwrap();
        assert_eq!(d.path(), &[1, 3, 5]);
        assert_eq!(d.hop_count, 3);
        assert!(Directed::along(&[1; 64]).is_err());
        let mut b = full(REQ);
        b[7] = 64;
        assert_eq!(Repr::parse(&b), Err(Error::HopCountTooLarge(64)));
    }

    #[test]
    fn lid_routed_and_bad_class() {
        let mut r = Repr::request(Method::Set, Tid(7), 0x15, 3, Route::Lid);
        r.m_key = 0x1122_3344_5566_7788;
        r.data.0[0] = 0xee;
        let b = r.to_bytes().unwrap();
        assert_eq!(b[1], 0x01);
        assert_eq!(&b[24..32], &0x1122_3344_5566_7788u64.to_be_bytes());
        assert_eq!(b[64], 0xee);
        assert_eq!(Repr::parse(&b).unwrap(), r);
        let mut bad = b;
        bad[1] = 0x03;
        bad[2] = 2;
        assert_eq!(Repr::parse(&bad), Err(Error::UnsupportedClass(0x03)));
        assert!(Repr::parse(&b[..255]).is_err());
    }
}
