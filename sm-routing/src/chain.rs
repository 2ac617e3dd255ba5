//! Engines by name and the fallback chain (`"ftree,updn,minhop"`), as OpenSM's `-R` runs
//! them. The only module that knows every engine.

use crate::ftree::FatTree;
use crate::layered::Layered;
use crate::minhop::MinHop;
use crate::routes::{Engine, Options, RouteError, Routes};
use crate::topo::Topo;
use crate::updn::UpDown;

/// The engine of a name.
pub fn engine(name: &str) -> Result<Box<dyn Engine>, RouteError> {
    match name {
        "minhop" => Ok(Box::new(MinHop)),
        "updn" => Ok(Box::new(UpDown)),
        "ftree" => Ok(Box::new(FatTree)),
        "layered" => Ok(Box::new(Layered)),
        other => Err(RouteError::UnknownEngine(other.to_string())),
    }
}

/// One engine of a chain that declined, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Fallback {
    pub engine: &'static str,
    pub reason: String,
}

/// The result of a chain: the tables, and every engine that declined before.
#[derive(Debug, Clone)]
pub struct ChainResult {
    pub routes: Routes,
    pub fallbacks: Vec<Fallback>,
}

/// Runs engines in order (`"ftree,updn,minhop"`) until one routes, as OpenSM's `-R` does;
/// only [`RouteError::NotApplicable`] moves on, any other error stops the chain.
pub fn route_chain(
    chain: &str,
    topo: &Topo<'_>,
    opts: &Options,
) -> Result<ChainResult, RouteError> {
    let mut fallbacks = Vec::new();
    for name in chain.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let e = engine(name)?;
        match e.route(topo, opts) {
            Ok(routes) => return Ok(ChainResult { routes, fallbacks }),
            Err(RouteError::NotApplicable { engine, reason }) => {
                fallbacks.push(Fallback { engine, reason })
            }
            Err(other) => return Err(other),
        }
    }
    Err(RouteError::ChainExhausted(
        fallbacks
            .iter()
            .map(|f| format!("{}: {}", f.engine, f.reason))
            .collect::<Vec<_>>()
            .join("; "),
    ))
}
