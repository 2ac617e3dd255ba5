//! The in-process simulated fabric of `ibsm`: a subnet management agent per node that
//! answers every SMP attribute the SM uses with the attribute's real rules, directed-route
//! and LID-routed forwarding through the programmed tables, traps, M_Key protection, and
//! fault injection (lossy links, flapping, reboots, removed, slow and silent nodes,
//! moved cables) scripted from tests or from a [`scenario`] file, all in virtual time so a
//! test is deterministic.

mod fault;
mod mkey;
mod probe;
pub mod scenario;
mod sim;
mod sma;
pub mod state;
pub mod testkit;
pub mod trace;

pub use fault::FaultError;
pub use probe::Probe;
pub use scenario::{Scenario, ScenarioError};
pub use sim::{
    Drop, EndpointId, Faults, Inbound, MAX_HOPS, Nanos, SendError, Sim, SimConfig, SimStats,
    SmEvent,
};

/// A fault with its node and port resolved: what [`Sim::schedule_fault`] and
/// [`Sim::apply_fault`] take, and what a [`Scenario`] line becomes.
pub type Fault = scenario::Action<sm_core::fabric::NodeIdx, sm_core::fabric::PortIdx>;
