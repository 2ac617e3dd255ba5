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

/// The chain `auto` stands for: ftree on a clean fat-tree (it declines anything else),
/// the layered engine otherwise (degraded trees, dragonflies, tori, any graph).
pub const AUTO: &str = "ftree,layered";

/// Runs engines in order (`"ftree,updn,minhop"`) until one routes, as OpenSM's `-R` does;
/// only [`RouteError::NotApplicable`] moves on, any other error stops the chain. `auto`
/// in the chain stands for [`AUTO`].
pub fn route_chain(
    chain: &str,
    topo: &Topo<'_>,
    opts: &Options,
) -> Result<ChainResult, RouteError> {
    let mut fallbacks = Vec::new();
    let names = chain
        .split(',')
        .map(str::trim)
        .flat_map(|n| {
            if n == "auto" {
                AUTO.split(',').collect()
            } else {
                vec![n]
            }
        })
        .filter(|s| !s.is_empty());
    for name in names {
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
