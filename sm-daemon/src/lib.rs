//! The `ibsm` subnet manager: the sans-IO core, and the shells that drive it.

pub mod config;
pub mod core;
pub mod ops;
pub mod perf;
pub mod sa;
pub mod soak;
pub mod transport;
