//! Minimum-hop routing, balanced as OpenSM's `minhop` balances: every LID goes out one of the
//! ports on a shortest path, the one fewest LIDs already use. The 2^LMC LIDs of one port
//! prefer different next switches, so they take disjoint paths where the fabric allows.
//! Switches are independent, so they are routed in parallel; the result does not depend on
//! the number of threads.
//!
//! The shortest-path ports of a switch towards every destination switch are computed once
//! per switch as bit masks (distance matrix rows of the switch and of its neighbours; the
//! matrix is symmetric, so a row is also a column), then [`crate::fill`] picks per LID.

use crate::engine::{Engine, Options, RouteError, Routes};
use crate::fill::{Policy, fill, jobs_in_dest_order};
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
        Ok(fill(self.name(), topo, &policy, &jobs, opts.adaptive))
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
        out.fill(0);
        for (i, a) in self.topo.adj(s).iter().enumerate() {
            let row_p = self.hops.to(a.peer);
            let (w, bit) = (i / 64, 1u64 << (i % 64));
            for (d, (&hs, &hp)) in row_s.iter().zip(row_p).enumerate() {
                let ok = hs != u8::MAX && hp.wrapping_add(1) == hs;
                out[d * words + w] |= bit * u64::from(ok);
            }
        }
    }
}
