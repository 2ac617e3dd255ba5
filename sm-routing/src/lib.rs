//! Routing for `ibsm`: engines behind one trait, the snapshot they work on, and (in later
//! modules) validation and quality metrics.

pub mod engine;
pub mod minhop;
pub mod topo;

pub use engine::{Engine, Options, RouteError, Routes, engine, route_chain};
pub use topo::{SwIdx, Topo};
