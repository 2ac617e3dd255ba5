//! Minimum-hop routing, balanced as OpenSM's `minhop` balances: every LID goes out one of the
//! ports on a shortest path, the one fewest LIDs already use. The 2^LMC LIDs of one port
//! prefer different next switches, so they take disjoint paths where the fabric allows.
//! Switches are independent, so they are routed in parallel; the result does not depend on
//! the number of threads.
//!
//! The shortest-path ports of a switch towards every destination switch are computed once
//! per switch as bit masks (distance matrix rows of the switch and of its neighbours; the
//! matrix is symmetric, so a row is also a column), then `fill.rs` picks per LID.

use crate::fill::{Policy, fill, jobs_in_dest_order};
use crate::routes::{Engine, Options, RouteError, Routes};
use crate::topo::{HopMatrix, SwIdx, Topo};

/// The engine.
#[derive(Debug, Clone, Copy, Default)]
pub struct MinHop;

impl Engine for MinHop {
    fn name(&self) -> &'static str {
        "minhop"
    }

    fn route(&self, topo: &Topo<'_>, opts: &Options) -> Result<Routes, RouteError> {
        let policy = MinHopPolicy {
            topo,
            hops: topo.hop_matrix(),
        };
        let jobs = jobs_in_dest_order(topo);
        Ok(fill(self.name(), topo, &policy, &jobs, opts))
    }
}

struct MinHopPolicy<'a, 'f> {
    topo: &'a Topo<'f>,
    hops: HopMatrix,
}

impl Policy for MinHopPolicy<'_, '_> {
    fn masks(&self, s: SwIdx, words: usize, out: &mut [u64]) {
        // hops.to(x)[d] = distance between x and d (either way).
        let row_s = self.hops.to(s);
        let adj = self.topo.adj(s);
        crate::fill::build_masks(
            self.topo.num_switches(),
            adj.len(),
            words,
            out,
            |i, start, len| {
                let hs = &row_s[start..start + len];
                let hp = &self.hops.to(adj[i].peer)[start..start + len];
                let mut m = 0u64;
                for (j, (&hs, &hp)) in hs.iter().zip(hp).enumerate() {
                    let ok = hs != u8::MAX && hp.wrapping_add(1) == hs;
                    m |= u64::from(ok) << j;
                }
                m
            },
        );
    }
}
