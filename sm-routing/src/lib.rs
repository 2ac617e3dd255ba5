//! Routing for `ibsm`: engines behind one trait, the snapshot they work on, validation of
//! forwarding tables (ours or another SM's) and their quality metrics.

pub mod engine;
pub mod metrics;
pub mod minhop;
pub mod topo;
pub mod validate;
mod walk;

pub use engine::{Engine, Options, RouteError, Routes, engine, route_chain};
pub use metrics::{Metrics, MetricsOptions, metrics};
pub use topo::{SwIdx, Topo};
pub use validate::{ValidateOptions, Validation, validate};
pub use walk::Fate;
