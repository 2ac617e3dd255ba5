//! Routing for `ibsm`: engines behind one trait, the snapshot they work on, adaptive-routing
//! hints, validation of forwarding tables (ours or another SM's) and their quality metrics.

pub mod ar;
pub mod engine;
mod fill;
pub mod ftree;
pub mod guids;
pub mod mcast;
pub mod metrics;
pub mod minhop;
mod par;
pub mod topo;
pub mod updn;
mod updown;
pub mod validate;
mod walk;

pub use engine::{Engine, Options, PreviousTables, RouteError, Routes, engine, route_chain};
pub use guids::{GuidFileError, read_guid_file};
pub use mcast::{GroupTree, McastPlanner, Mfts, PortMask, TreeOrder};
pub use metrics::{Metrics, MetricsOptions, metrics};
pub use topo::{SwIdx, Topo, TopoError};
pub use validate::{ValidateOptions, Validation, validate};
pub use walk::Fate;
