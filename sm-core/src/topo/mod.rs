//! Topology files: ibnetdiscover output and ibsim net files, read into a [`Fabric`].
//!
//! The two formats share one grammar (ibsim reads ibnetdiscover dumps), so one reader serves
//! both: node records (`Switch 36 "id" # "desc" ...`, `Ca 2 "id"`, `Hca`, `Rt`) followed by
//! port lines (`[p](guid) "remote"[rp](guid) w=.. # comment`), GUID assignment lines
//! (`switchguid=`, `caguid=`, `sysimgguid=`, ...), `include "file"` and `do CMD` lines.
//! Nodes without explicit GUIDs get the GUIDs ibsim would give them, so a net file read here
//! describes the same fabric an SM discovers when ibsim runs that file.

mod read;
mod write;

pub use read::{read_topology, read_topology_str};
pub use write::{WriteOptions, write_ibnetdiscover};

use crate::fabric::{Fabric, PortIdx};
use std::path::PathBuf;

/// A fabric read from a file, with what the file said beyond the fabric itself.
#[derive(Debug, Clone)]
pub struct Topology {
    pub fabric: Fabric,
    /// The first port of the first node (ibsim attaches its first client there).
    pub first_port: Option<PortIdx>,
    /// `do ...` commands found in ibsim net files, in order, with file and line.
    pub commands: Vec<(PathBuf, usize, String)>,
}

/// Where and why a topology file was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}:{line}: {kind}", file.display())]
pub struct TopoError {
    pub file: PathBuf,
    /// 1-based line (0 when the file could not be read at all).
    pub line: usize,
    pub kind: TopoErrorKind,
}

/// What is wrong in a topology file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TopoErrorKind {
    #[error("cannot read file: {0}")]
    Io(String),
    #[error("syntax error: {0}")]
    Syntax(String),
    #[error("port line outside a node record")]
    PortOutsideNode,
    #[error("node \"{node}\" has {ports} ports; port {port} is out of range")]
    PortOutOfRange { node: String, port: u32, ports: u8 },
    #[error("node \"{node}\": port count {count} is out of range 1..=254")]
    BadPortCount { node: String, count: u32 },
    #[error("port {port} of node \"{node}\" is listed twice")]
    DuplicatePort { node: String, port: u8 },
    #[error("node id \"{0}\" is defined twice")]
    DuplicateId(String),
    #[error("duplicate GUID: {0}")]
    DuplicateGuid(String),
    #[error("port {port} of \"{node}\" links to unknown node \"{remote}\"")]
    UnknownRemote {
        node: String,
        port: u8,
        remote: String,
    },
    #[error(
        "asymmetric link: \"{node}\"[{port}] -> \"{remote}\"[{remote_port}], but \"{remote}\"[{remote_port}] {back}"
    )]
    AsymmetricLink {
        node: String,
        port: u8,
        remote: String,
        remote_port: u8,
        back: String,
    },
    #[error("{0}")]
    Link(String),
    #[error("include nesting deeper than {0} (include loop?)")]
    IncludeDepth(usize),
    #[error("unsupported directive: {0}")]
    Unsupported(String),
}
