//! Minimum-hop routing, balanced as OpenSM's `minhop` balances: every LID goes out one of the
//! ports on a shortest path, the one fewest LIDs already use. The 2^LMC LIDs of one port
//! prefer different next switches, so they take disjoint paths where the fabric allows.
//! Switches are independent, so they are routed in parallel; the result does not depend on
//! the number of threads.

use rayon::prelude::*;
use sm_mad::Lid;

use crate::engine::{Engine, Options, RouteError, Routes};
use crate::topo::{HopMatrix, SwIdx, Topo};

/// The engine.
#[derive(Debug, Clone, Copy, Default)]
pub struct MinHop;

impl Engine for MinHop {
    fn name(&self) -> &'static str {
        "minhop"
    }

    fn route(&self, topo: &Topo<'_>, _opts: &Options) -> Result<Routes, RouteError> {
        let hops = topo.hop_matrix();
        let mut routes = Routes::empty(self.name(), topo);
        routes
            .lft
            .par_iter_mut()
            .enumerate()
            .for_each(|(s, table)| route_switch(topo, &hops, SwIdx(s as u32), table));
        Ok(routes)
    }
}

/// Fills one switch's table.
fn route_switch(topo: &Topo<'_>, hops: &HopMatrix, s: SwIdx, table: &mut [u8]) {
    let adj = topo.adj(s);
    let mut load = [0u32; 256];
    // Next switches already used by earlier LIDs of the same destination port.
    let mut used_peers: Vec<SwIdx> = Vec::new();
    for d in &topo.dests {
        used_peers.clear();
        for lid in d.lids() {
            let port = if d.sw == s {
                Some(d.sw_port)
            } else {
                let here = hops.get(s, d.sw);
                if here == u8::MAX {
                    None
                } else {
                    let to = hops.to(d.sw);
                    // Best candidate: not yet used by this port's other LIDs, then least
                    // loaded, then lowest port number.
                    adj.iter()
                        .filter(|a| to[a.peer.idx()] == here - 1)
                        .min_by_key(|a| {
                            (used_peers.contains(&a.peer), load[a.port as usize], a.port)
                        })
                        .map(|a| {
                            used_peers.push(a.peer);
                            a.port
                        })
                }
            };
            if let Some(p) = port {
                load[p as usize] += 1;
                set(table, lid, p);
            }
        }
    }
}

#[inline]
fn set(table: &mut [u8], lid: Lid, port: u8) {
    if let Some(e) = table.get_mut(lid.0 as usize) {
        *e = port;
    }
}
