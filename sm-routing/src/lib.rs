//! Routing for `ibsm`: engines behind one trait, the snapshot they work on, adaptive-routing
//! hints, validation of forwarding tables (ours or another SM's) and their quality metrics.
//!
//! Modules in layers, each using only those before it:
//! - [`topo`]: the snapshot every engine reads (switches, compressed adjacency, LIDs);
//! - [`routes`]: the [`Engine`] trait, its [`Options`] and the [`Routes`] it returns;
//! - `fill`, `labels`, `rank`: what engines share (one port per LID from candidate port
//!   masks; up/down labels, the deadlock rule of `updn` and `ftree`; switch ranks and the
//!   fat-tree shape);
//! - [`minhop`], [`updn`], [`ftree`], [`layered`]: the engines;
//! - [`chain`]: engines by name and the fallback chain;
//! - [`ar`], [`mcast`], [`mod@validate`], [`mod@metrics`]: what is built on routes.

pub mod ar;
pub mod chain;
mod fill;
pub mod ftree;
pub mod guids;
mod labels;
pub mod layered;
pub mod mcast;
pub mod metrics;
pub mod minhop;
mod par;
mod rank;
pub mod relayer;
pub mod repair;
pub mod routes;
pub mod sl;
pub mod topo;
mod torus;
pub mod updn;
pub mod validate;
mod walk;

pub use chain::{ChainResult, Fallback, engine, route_chain};
pub use guids::{GuidFileError, read_guid_file};
pub use mcast::{GroupTree, McastPlanner, Mfts, PortMask, TreeOrder};
pub use metrics::{Metrics, MetricsOptions, metrics};
pub use routes::{
    Dir, Engine, Options, PathSl, PreviousTables, RouteError, Routes, Rule, SwitchAr,
};
pub use topo::{DestIdx, SwIdx, Topo, TopoError};
pub use validate::{ValidateOptions, Validation, validate, validate_tables};
pub use walk::{Fate, Tables};

/// The trait, its inputs and outputs and the chain under the path they had before they were
/// split into [`routes`] and [`chain`], for code that still names them this way.
pub mod engine {
    pub use crate::chain::{ChainResult, Fallback, engine, route_chain};
    pub use crate::routes::{Engine, Options, PreviousTables, RouteError, Routes, SwitchAr};
}

/// The number of threads routing and validation run on; starts them on first use, so a
/// caller that pins its own thread afterwards leaves them free.
pub fn rayon_threads() -> usize {
    rayon::current_num_threads()
}
