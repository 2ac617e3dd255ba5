//! Routing for `ibsm`: engines behind one trait, the snapshot they work on, adaptive-routing
//! hints, and (in later modules) validation and quality metrics.

pub mod ar;
pub mod engine;
mod fill;
pub mod ftree;
pub mod guids;
pub mod minhop;
pub mod topo;
pub mod updn;
mod updown;

pub use engine::{Engine, Options, RouteError, Routes, engine, route_chain};
pub use guids::{GuidFileError, read_guid_file};
pub use topo::{SwIdx, Topo};
