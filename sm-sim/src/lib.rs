//! The in-process simulated fabric of `ibsm`: a subnet management agent per node that
//! answers every SMP attribute the SM uses with the attribute's real rules, directed-route
//! and LID-routed forwarding through the programmed tables, traps, and fault injection, all
//! in virtual time so a test is deterministic.

mod sim;
mod sma;
pub mod state;
pub mod testkit;
pub mod trace;

pub use sim::{
    Drop, EndpointId, Faults, Inbound, MAX_HOPS, Nanos, SendError, Sim, SimConfig, SimStats,
};
