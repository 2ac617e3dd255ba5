//! A dissector: any MAD to a typed description that serialises with the specification's
//! field names. Used by `ibsm decode` and for logging. Not on any hot path.

use crate::attr::{SaAttrId, SmpAttrId};
use crate::mad::{self, Method, MgmtClass};
use crate::smp::{self, Route};
use crate::{Error, Result, Wire, sa};
use crate::{
    class_port_info, guid_info, guid_info_record, inform_info, inform_info_record, lft, lft_record,
    link_record, mcmember_record, mft, mft_record, multipath_record, node_description, node_info,
    node_record, notice, path_record, pkey_table, pkey_table_record, port_info, port_info_record,
    rmpp, service_record, sl2vl, sl2vl_record, sm_info, sm_info_record, switch_info,
    switch_info_record, vl_arb, vl_arb_record,
};

macro_rules! bodies {
    ($( $variant:ident => $ty:ty, )*) => {
        /// A decoded attribute or record.
        #[derive(Debug, Clone, PartialEq, serde::Serialize)]
        #[serde(tag = "attribute")]
        #[allow(clippy::large_enum_variant)]
        #[non_exhaustive]
        pub enum Body {
            $( $variant($ty), )*
            /// An attribute this dissector does not decode, as hex.
            Raw {
                attr_id: u16,
                name: Option<&'static str>,
                data: String,
            },
        }
    };
}

bodies! {
    NodeDescription => node_description::Repr,
    NodeInfo => node_info::Repr,
    SwitchInfo => switch_info::Repr,
    GuidInfo => guid_info::Repr,
    PortInfo => port_info::Repr,
    PKeyTable => pkey_table::Repr,
    SlToVlMappingTable => sl2vl::Repr,
    VlArbitrationTable => vl_arb::Repr,
    LinearForwardingTable => lft::Repr,
    MulticastForwardingTable => mft::Repr,
    SmInfo => sm_info::Repr,
    Notice => notice::Repr,
    ClassPortInfo => class_port_info::Repr,
    InformInfo => inform_info::Repr,
    InformInfoRecord => inform_info_record::Repr,
    PathRecord => path_record::Repr,
    MultiPathRecord => multipath_record::Repr,
    McMemberRecord => mcmember_record::Repr,
    ServiceRecord => service_record::Repr,
    NodeRecord => node_record::Repr,
    PortInfoRecord => port_info_record::Repr,
    LinkRecord => link_record::Repr,
    SwitchInfoRecord => switch_info_record::Repr,
    LinearForwardingTableRecord => lft_record::Repr,
    MulticastForwardingTableRecord => mft_record::Repr,
    PKeyTableRecord => pkey_table_record::Repr,
    SlToVlMappingTableRecord => sl2vl_record::Repr,
    VlArbitrationTableRecord => vl_arb_record::Repr,
    SmInfoRecord => sm_info_record::Repr,
    GuidInfoRecord => guid_info_record::Repr,
}

/// The subnet-management part of an SMP beyond the common header.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SmpPart {
    pub m_key: String,
    /// "lid" or "directed".
    pub routing: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub d: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hop_pointer: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hop_count: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dr_slid: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dr_dlid: Option<u16>,
    /// Exit ports of the initial path, hop 1 first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initial_path: Option<Vec<u8>>,
    /// The return path as filled in so far.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub return_path: Option<Vec<u8>>,
}

/// The subnet-administration part of an SA MAD beyond the common header.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SaPart {
    pub rmpp: rmpp::Repr,
    pub sm_key: String,
    pub attribute_offset: u16,
    pub component_mask: String,
}

/// One decoded MAD.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Decoded {
    pub mad: mad::Repr,
    /// The attribute's name, when known.
    pub attribute_name: Option<&'static str>,
    /// What the attribute modifier selects, in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attr_mod_meaning: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub smp: Option<SmpPart>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sa: Option<SaPart>,
    /// SMP data or the first SA record (requests carry their template record here).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub records: Vec<Body>,
    /// Things worth knowing that did not stop the decode (reserved bits, undecoded data).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn body_smp(attr_id: u16, data: &[u8]) -> Result<Body> {
    Ok(match SmpAttrId::from_raw_value(attr_id) {
        SmpAttrId::NodeDescription => Body::NodeDescription(Wire::parse(data)?),
        SmpAttrId::NodeInfo => Body::NodeInfo(Wire::parse(data)?),
        SmpAttrId::SwitchInfo => Body::SwitchInfo(Wire::parse(data)?),
        SmpAttrId::GuidInfo => Body::GuidInfo(Wire::parse(data)?),
        SmpAttrId::PortInfo => Body::PortInfo(Wire::parse(data)?),
        SmpAttrId::PKeyTable => Body::PKeyTable(Wire::parse(data)?),
        SmpAttrId::SlToVlMappingTable => Body::SlToVlMappingTable(Wire::parse(data)?),
        SmpAttrId::VlArbitrationTable => Body::VlArbitrationTable(Wire::parse(data)?),
        SmpAttrId::LinearForwardingTable => Body::LinearForwardingTable(Wire::parse(data)?),
        SmpAttrId::MulticastForwardingTable => Body::MulticastForwardingTable(Wire::parse(data)?),
        SmpAttrId::SmInfo => Body::SmInfo(Wire::parse(data)?),
        SmpAttrId::Notice => Body::Notice(notice::Repr::parse(data)?),
        other => Body::Raw {
            attr_id,
            name: other.name(),
            data: hex(data),
        },
    })
}

/// Parses one record into a [`Body`].
type RecordParser = fn(&[u8]) -> Result<Body>;

/// The record length and parser of an SA attribute, when the dissector knows it.
fn sa_record(attr_id: u16) -> Option<(usize, RecordParser)> {
    macro_rules! rec {
        ($ty:ty, $v:ident) => {
            Some((<$ty as Wire>::LEN, |b: &[u8]| {
                <$ty as Wire>::parse(b).map(Body::$v)
            }))
        };
    }
    match SaAttrId::from_raw_value(attr_id) {
        SaAttrId::ClassPortInfo => rec!(class_port_info::Repr, ClassPortInfo),
        SaAttrId::InformInfo => rec!(inform_info::Repr, InformInfo),
        SaAttrId::InformInfoRecord => rec!(inform_info_record::Repr, InformInfoRecord),
        SaAttrId::PathRecord => rec!(path_record::Repr, PathRecord),
        SaAttrId::MultiPathRecord => rec!(multipath_record::Repr, MultiPathRecord),
        SaAttrId::McMemberRecord => rec!(mcmember_record::Repr, McMemberRecord),
        SaAttrId::ServiceRecord => rec!(service_record::Repr, ServiceRecord),
        SaAttrId::NodeRecord => rec!(node_record::Repr, NodeRecord),
        SaAttrId::PortInfoRecord => rec!(port_info_record::Repr, PortInfoRecord),
        SaAttrId::LinkRecord => rec!(link_record::Repr, LinkRecord),
        SaAttrId::SwitchInfoRecord => rec!(switch_info_record::Repr, SwitchInfoRecord),
        SaAttrId::LinearForwardingTableRecord => {
            rec!(lft_record::Repr, LinearForwardingTableRecord)
        }
        SaAttrId::MulticastForwardingTableRecord => {
            rec!(mft_record::Repr, MulticastForwardingTableRecord)
        }
        SaAttrId::PKeyTableRecord => rec!(pkey_table_record::Repr, PKeyTableRecord),
        SaAttrId::SlToVlMappingTableRecord => rec!(sl2vl_record::Repr, SlToVlMappingTableRecord),
        SaAttrId::VlArbitrationTableRecord => rec!(vl_arb_record::Repr, VlArbitrationTableRecord),
        SaAttrId::SmInfoRecord => rec!(sm_info_record::Repr, SmInfoRecord),
        SaAttrId::GuidInfoRecord => rec!(guid_info_record::Repr, GuidInfoRecord),
        SaAttrId::Notice => Some((notice::FULL_LEN, |b: &[u8]| {
            notice::Repr::parse(b).map(Body::Notice)
        })),
        _ => None,
    }
}

fn attr_mod_meaning(class: MgmtClass, attr_id: u16, m: u32) -> Option<String> {
    if !matches!(class, MgmtClass::SubnLid | MgmtClass::SubnDirected) {
        return None;
    }
    Some(match SmpAttrId::from_raw_value(attr_id) {
        SmpAttrId::PortInfo => format!("port {m}"),
        SmpAttrId::GuidInfo => format!("GUID block {m}"),
        SmpAttrId::LinearForwardingTable => {
            let b = m.min(u16::MAX as u32) as u16;
            let r = lft::lid_range(b);
            format!("block {m}: LIDs {}..={}", r.start().0, r.end().0)
        }
        SmpAttrId::PKeyTable => format!("block {}, port {}", m & 0xffff, (m >> 16) & 0xff),
        SmpAttrId::SlToVlMappingTable => {
            format!("input port {}, output port {}", (m >> 8) & 0xff, m & 0xff)
        }
        SmpAttrId::VlArbitrationTable => format!("block {}, port {}", m >> 16, m & 0xff),
        SmpAttrId::MulticastForwardingTable => {
            format!("block {}, port position {}", m & 0x1ff, m >> 28)
        }
        _ => return None,
    })
}

/// Whether the data field of an SMP with this method carries an attribute.
fn smp_carries_data(method: Method) -> bool {
    !matches!(method, Method::Get)
}

/// Decodes one MAD. Fails only when the common header itself is unusable; problems in the
/// body become notes with the body shown raw.
pub fn decode(buf: &[u8]) -> Result<Decoded> {
    let hdr = mad::Repr::parse(buf)?;
    let mut d = Decoded {
        mad: hdr,
        attribute_name: None,
        attr_mod_meaning: attr_mod_meaning(hdr.mgmt_class, hdr.attr_id, hdr.attr_mod),
        smp: None,
        sa: None,
        records: Vec::new(),
        notes: Vec::new(),
    };
    match hdr.mgmt_class {
        MgmtClass::SubnLid | MgmtClass::SubnDirected => decode_smp(buf, &mut d)?,
        MgmtClass::SubnAdm => decode_sa(buf, &mut d)?,
        other => d.notes.push(format!(
            "management class {:#04x} is not decoded beyond the header",
            other.to_raw_value()
        )),
    }
    Ok(d)
}

fn decode_smp(buf: &[u8], d: &mut Decoded) -> Result<()> {
    d.attribute_name = SmpAttrId::from_raw_value(d.mad.attr_id).name();
    let s = smp::Repr::parse(buf)?;
    d.smp = Some(match s.route {
        Route::Lid => SmpPart {
            m_key: format!("{:#018x}", s.m_key),
            routing: "lid",
            d: None,
            hop_pointer: None,
            hop_count: None,
            dr_slid: None,
            dr_dlid: None,
            initial_path: None,
            return_path: None,
        },
        Route::Directed(r) => {
            let n = r.hop_count as usize;
            SmpPart {
                m_key: format!("{:#018x}", s.m_key),
                routing: "directed",
                d: Some(r.direction),
                hop_pointer: Some(r.hop_pointer),
                hop_count: Some(r.hop_count),
                dr_slid: Some(r.dr_slid.0),
                dr_dlid: Some(r.dr_dlid.0),
                initial_path: Some(r.initial_path.0[1..=n].to_vec()),
                return_path: Some(r.return_path.0[1..=n].to_vec()),
            }
        }
    });
    if !smp_carries_data(s.method) {
        return Ok(());
    }
    match body_smp(s.attr_id, &s.data.0) {
        Ok(b) => {
            if let Body::Raw { .. } = b {
                d.notes
                    .push("attribute not decoded by this dissector: data shown raw".into());
            }
            d.records.push(b)
        }
        Err(e) => {
            d.notes.push(format!("attribute data: {e}"));
            d.records.push(Body::Raw {
                attr_id: s.attr_id,
                name: d.attribute_name,
                data: hex(&s.data.0),
            });
        }
    }
    Ok(())
}

fn decode_sa(buf: &[u8], d: &mut Decoded) -> Result<()> {
    d.attribute_name = SaAttrId::from_raw_value(d.mad.attr_id).name();
    // SA answers are often captured at their real length (header + records): pad to a MAD.
    let mut full = [0u8; sa::LEN];
    let n = buf.len().min(sa::LEN);
    full[..n].copy_from_slice(&buf[..n]);
    if buf.len() < sa::HEADER_LEN {
        return Err(Error::Truncated {
            what: "SA MAD",
            need: sa::HEADER_LEN,
            got: buf.len(),
        });
    }
    let s = sa::Repr::parse(&full)?;
    d.sa = Some(SaPart {
        rmpp: s.rmpp,
        sm_key: format!("{:#018x}", s.sm_key),
        attribute_offset: s.attribute_offset,
        component_mask: format!("{:#018x}", s.component_mask),
    });
    let Some((len, parse)) = sa_record(s.attr_id) else {
        let data = &s.data.0[..(n - sa::HEADER_LEN)];
        if data.iter().any(|&b| b != 0) {
            d.notes
                .push("records of this attribute are not decoded: data shown raw".into());
            d.records.push(Body::Raw {
                attr_id: s.attr_id,
                name: d.attribute_name,
                data: hex(data),
            });
        }
        return Ok(());
    };
    let avail = &s.payload()[..(n - sa::HEADER_LEN).min(s.payload().len())];
    let stride = s.attribute_offset as usize * 8;
    if stride == 0 || !s.method.is_response() {
        // A request's template record, or a single-record answer (Get/Set/Delete).
        if avail.iter().any(|&b| b != 0) || !s.method.is_response() {
            push_record(d, parse, &s.data.0[..len.min(sa::DATA_LEN)], len);
        }
        return Ok(());
    }
    if stride < len {
        d.notes.push(format!(
            "attribute_offset {} ({} bytes) is shorter than a {} ({} bytes)",
            s.attribute_offset,
            stride,
            d.attribute_name.unwrap_or("record"),
            len
        ));
        return Ok(());
    }
    let mut off = 0;
    while off + len <= avail.len() {
        let rec = &avail[off..off + len];
        if rec.iter().all(|&b| b == 0) && off + stride >= avail.len() {
            break; // padding after the last record of a single MAD
        }
        push_record(d, parse, rec, len);
        off += stride;
    }
    if avail.len() == sa::DATA_LEN && s.rmpp.rmpp_flags.contains(rmpp::RmppFlags::ACTIVE) {
        d.notes.push(
            "one MAD of an RMPP transfer: records of later segments are not in this buffer".into(),
        );
    }
    Ok(())
}

fn push_record(d: &mut Decoded, parse: RecordParser, bytes: &[u8], len: usize) {
    match parse(bytes) {
        Ok(b) => d.records.push(b),
        Err(e) => {
            d.notes.push(format!("record {}: {e}", d.records.len()));
            d.records.push(Body::Raw {
                attr_id: d.mad.attr_id,
                name: d.attribute_name,
                data: hex(&bytes[..len.min(bytes.len())]),
            });
        }
    }
}
