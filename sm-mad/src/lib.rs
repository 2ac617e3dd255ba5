//! The InfiniBand management datagram (MAD) wire codec of `ibsm`.
//!
//! Every structure comes in two layers, as in smoltcp's `wire` module:
//! a zero-copy `Packet<T: AsRef<[u8]>>` view whose accessors read one field straight from
//! the buffer, and an owned `Repr` with `parse`, `buffer_len` and `emit`. Field layouts are
//! `(bit offset, bit width)` pairs in the specification's bit numbering (bit 0 is the most
//! significant bit of byte 0), so each module reads like the attribute's table in the
//! InfiniBand Architecture Specification, Vol. 1.
//!
//! Parsing never panics: short buffers, bad versions and impossible values are typed
//! [`Error`]s. Enumerations keep values they do not name, so parse -> emit reproduces any
//! well-formed input byte for byte (reserved bits are emitted as zero; use a view's
//! `check_reserved` to reject input that sets them).

#![forbid(unsafe_code)]

pub mod attr;
pub mod bits;
pub mod class_port_info;
pub mod decode;
mod error;
pub mod guid_info;
pub mod guid_info_record;
pub mod inform_info;
pub mod inform_info_record;
pub mod lft;
pub mod lft_record;
pub mod link;
pub mod link_record;
pub mod mad;
pub mod mcmember_record;
pub mod mft;
pub mod mft_record;
pub mod multipath_record;
pub mod node_description;
pub mod node_info;
pub mod node_record;
pub mod notice;
pub mod path_record;
pub mod perf;
pub mod pkey_table;
pub mod pkey_table_record;
pub mod port_info;
pub mod port_info_record;
pub mod rmpp;
pub mod sa;
pub mod service_record;
pub mod sl2vl;
pub mod sl2vl_record;
pub mod sm_info;
pub mod sm_info_record;
pub mod smp;
pub mod switch_info;
pub mod switch_info_record;
pub mod table;
#[cfg(test)]
mod test_vectors;
mod types;
pub mod vl_arb;
pub mod vl_arb_record;

pub use bits::{Bytes, Field, WireScalar, WireValue};
pub use error::{Error, Result, RmppError};
pub use mad::{MadStatus, Method, MgmtClass};
pub use types::{Gid, Guid, Lid, PKey, ParseGuidError, PortNum, Sl, Tid, Vl};

/// Size of every MAD on the wire (UD QP0/QP1 payload).
pub const MAD_LEN: usize = 256;

/// A fixed-size wire structure: an attribute, a record or a header.
pub trait Wire: Sized {
    /// The structure's name, for errors and dissector output.
    const NAME: &'static str;
    /// Bytes on the wire.
    const LEN: usize;
    /// Parses and validates the structure from the start of `buf`.
    fn parse(buf: &[u8]) -> Result<Self>;
    /// Writes the structure into the start of `buf`.
    fn emit(&self, buf: &mut [u8]) -> Result<()>;
    /// The strict check: fails on the first reserved bit set in `buf` (offsets relative to
    /// `buf`). Structures without reserved bits accept everything.
    fn check_reserved(buf: &[u8]) -> Result<()> {
        let _ = buf;
        Ok(())
    }
    /// The structure as the wire keeps it (every field cut to its width): what `parse`
    /// returns after `emit`.
    fn truncated(&self) -> Self
    where
        Self: Clone,
    {
        self.clone()
    }
}

/// An attribute that subnet management packets carry in their 64-byte data field.
pub trait SmpAttribute: Wire {
    /// The attribute id in the MAD header.
    const ID: u16;
}
