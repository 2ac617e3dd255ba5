//! The one error type of the codec: what is wrong and where.

/// Why a buffer could not be parsed or emitted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The buffer is shorter than the structure it should hold.
    #[error("{what}: truncated: need {need} bytes, got {got}")]
    Truncated {
        what: &'static str,
        need: usize,
        got: usize,
    },
    /// The common MAD header's BaseVersion is not 1.
    #[error("MAD header: base_version {0:#04x} is not 0x01")]
    BadBaseVersion(u8),
    /// The class version does not match the management class.
    #[error("MAD header: class_version {version} is not valid for management class {class:#04x}")]
    BadClassVersion { class: u8, version: u8 },
    /// A management class this codec does not decode.
    #[error("MAD header: unsupported management class {0:#04x}")]
    UnsupportedClass(u8),
    /// An attribute id that the class does not define (or the codec does not know).
    #[error("MAD header: unsupported attribute_id {id:#06x} for management class {class:#04x}")]
    UnsupportedAttribute { class: u8, id: u16 },
    /// Bits the specification reserves are not zero.
    #[error("{what}: reserved bits set at byte {offset} (mask {mask:#04x}), after field {after}")]
    ReservedBitsSet {
        what: &'static str,
        after: &'static str,
        offset: usize,
        mask: u8,
    },
    /// A field holds a value the specification forbids.
    #[error("{what}: field {field} has invalid value {value}")]
    InvalidField {
        what: &'static str,
        field: &'static str,
        value: u64,
    },
    /// A directed-route SMP with more hops than the 64-byte path arrays allow.
    #[error("directed-route SMP: hop_count {0} exceeds 63")]
    HopCountTooLarge(u8),
    /// A record length (SA attribute offset) that does not fit the payload.
    #[error(
        "SA MAD: attribute_offset {offset} (x8 bytes) does not fit a {record} record of {need} bytes"
    )]
    BadAttributeOffset {
        record: &'static str,
        offset: u16,
        need: usize,
    },
    /// An RMPP segment that breaks the transfer's rules.
    #[error("RMPP: {0}")]
    Rmpp(#[from] RmppError),
    /// The output buffer is too small for `emit`.
    #[error("{what}: output buffer too small: need {need} bytes, got {got}")]
    BufferTooSmall {
        what: &'static str,
        need: usize,
        got: usize,
    },
}

/// RMPP protocol violations found while reassembling or checking segments.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RmppError {
    #[error("segment_number {got} arrived out of order (expected {expected})")]
    OutOfOrder { expected: u32, got: u32 },
    #[error("first segment has segment_number {0} (must be 1) or lacks the First flag")]
    BadFirst(u32),
    #[error("unsupported rmpp_version {0} (expected 1)")]
    BadVersion(u8),
    #[error("unexpected rmpp_type {0}")]
    BadType(u8),
    #[error("payload_length {payload} is inconsistent with {segments} segments")]
    BadLength { payload: u32, segments: u32 },
    #[error("segment_number {0} is beyond the limit of this transfer")]
    TooManySegments(u32),
    #[error("segment belongs to another transfer (tid {got:#x}, expected {expected:#x})")]
    WrongTransfer { expected: u64, got: u64 },
    #[error("transfer already complete")]
    Complete,
    #[error("peer aborted the transfer with rmpp_status {0}")]
    Aborted(u8),
    #[error("peer stopped the transfer with rmpp_status {0}")]
    Stopped(u8),
    #[error("the MAD's RMPP header is not active")]
    NotActive,
    #[error("rmpp_status {0} is not allowed in this RMPP type")]
    IllegalStatus(u8),
    #[error("ACK of segment {segment} has new_window_last {new_window_last} below it")]
    WindowTooSmall { segment: u32, new_window_last: u32 },
    #[error("no ACK after {0} retries")]
    TooManyRetries(u32),
    #[error("transfer abandoned locally with rmpp_status {0}")]
    Cancelled(u8),
}

impl RmppError {
    /// The RMPPStatus of the ABORT this violation calls for, if the peer is to be told.
    pub const fn abort_status(&self) -> Option<crate::rmpp::RmppStatus> {
        use crate::rmpp::RmppStatus as S;
        match self {
            RmppError::BadFirst(_) => Some(S::InconsistentFirstAndSegmentNumber),
            RmppError::BadVersion(_) => Some(S::UnsupportedVersion),
            RmppError::BadType(_) => Some(S::BadRmppType),
            RmppError::BadLength { .. } => Some(S::InconsistentLastAndPayloadLength),
            RmppError::TooManySegments(_) => Some(S::SegmentNumberTooBig),
            RmppError::IllegalStatus(_) => Some(S::IllegalStatus),
            RmppError::WindowTooSmall { .. } => Some(S::NewWindowLastTooSmall),
            RmppError::TooManyRetries(_) => Some(S::TooManyRetries),
            _ => None,
        }
    }
}

/// The codec's result type.
pub type Result<T> = core::result::Result<T, Error>;
