//! The fabric model of `ibsm`: nodes, ports, links and LIDs, and the text formats that
//! describe them.

pub mod config;
pub mod dump;
pub mod fabric;
pub mod generate;
pub mod idx;
pub mod lft;
pub mod lid;
pub mod mcast;
pub mod mkey;
pub mod partitions;
pub mod qos;
pub mod state_file;
pub mod topo;

pub use fabric::{Fabric, FabricError, Node, NodeIdx, NodeKind, NodeSpec, Port, PortIdx, Speed};
pub use generate::{GenError, GenSpec, generate};
pub use idx::{Idx, IdxVec, OptIdx};
pub use topo::{TopoError, TopoErrorKind, Topology, read_topology, read_topology_str};
