//! Walking forwarding tables without trusting them: what is behind every switch port, and
//! for one destination LID the fate of a packet at every switch, found by memoised pointer
//! chasing (each switch is resolved once per LID, so a LID costs O(switches)). Shared by
//! validation and metrics.
//!
//! Tables are read through 64-LID blocks transposed to `[switch][lid]` ([`Block`]): a
//! destination LID's column then sits in one small buffer instead of one cache line of
//! every switch's table.

use sm_core::dump::NO_ROUTE;
use sm_mad::{Guid, Lid};

use crate::engine::Routes;
use crate::topo::{Dest, SwIdx, Topo};
use sm_core::NodeKind;

/// "No index".
pub(crate) const NONE: u32 = u32::MAX;

/// LIDs per transposed block.
pub(crate) const BLOCK: usize = 64;

/// How a walk along the forwarding tables ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Fate {
    /// Delivered to the port that owns the LID.
    Delivered,
    /// The switch has no entry for the LID.
    NoEntry,
    /// The entry names a port the switch does not have.
    BadPort,
    /// The entry names a port with no link.
    NotCabled,
    /// The port leads to an end port (CA or router) that does not own the LID: a CA used as
    /// transit, or a route to the wrong host.
    WrongEndPort,
    /// Port 0 (the switch itself), but the switch does not own the LID.
    NotOwner,
    /// The walk came back to a switch it had passed: a forwarding loop.
    Loop,
}

impl Fate {
    /// All fates, in declaration order (the index of each in count arrays).
    pub const ALL: [Fate; 7] = [
        Fate::Delivered,
        Fate::NoEntry,
        Fate::BadPort,
        Fate::NotCabled,
        Fate::WrongEndPort,
        Fate::NotOwner,
        Fate::Loop,
    ];

    /// What happened, in words.
    pub fn describe(self) -> &'static str {
        match self {
            Fate::Delivered => "delivered",
            Fate::NoEntry => "no forwarding entry",
            Fate::BadPort => "entry names a port beyond the switch's radix",
            Fate::NotCabled => "entry names a port with no link",
            Fate::WrongEndPort => "port leads to an end port that does not own the LID",
            Fate::NotOwner => "sent to port 0, but the switch does not own the LID",
            Fate::Loop => "forwarding loop: the walk revisits this switch",
        }
    }
}

/// What is behind one switch port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    /// Port 0: the switch itself.
    Own,
    /// A link to a switch, forming channel `chan`.
    Switch { sw: u32, chan: u32 },
    /// A link to an end port: an index into `Topo::dests`.
    End { dest: u32 },
    /// No link.
    Open,
}

/// A channel: one direction of a switch-to-switch link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Chan {
    pub(crate) from: u32,
    pub(crate) port: u8,
    pub(crate) to: u32,
    pub(crate) to_port: u8,
}

/// Every switch port's target, the channels, and the source ports (CA and router ports)
/// grouped by the switch they hang off.
#[derive(Debug, Clone)]
pub(crate) struct Wiring {
    port_off: Vec<u32>,
    targets: Vec<Target>,
    pub(crate) chans: Vec<Chan>,
    src_off: Vec<u32>,
    sources: Vec<u32>,
}

impl Wiring {
    pub(crate) fn new(topo: &Topo<'_>) -> Wiring {
        let n = topo.num_switches();
        let mut port_off = Vec::with_capacity(n + 1);
        let mut targets = Vec::new();
        let mut chans = Vec::new();
        for s in 0..n {
            let sw = SwIdx(s as u32);
            port_off.push(targets.len() as u32);
            let base = targets.len();
            targets.push(Target::Own);
            targets.extend(std::iter::repeat_n(Target::Open, topo.radix(sw) as usize));
            for a in topo.adj(sw) {
                if let Some(t) = targets[base..].get_mut(a.port as usize) {
                    *t = Target::Switch {
                        sw: a.peer.0,
                        chan: chans.len() as u32,
                    };
                    chans.push(Chan {
                        from: s as u32,
                        port: a.port,
                        to: a.peer.0,
                        to_port: a.peer_port,
                    });
                }
            }
        }
        port_off.push(targets.len() as u32);
        let mut count = vec![0u32; n + 1];
        for (i, d) in topo.dests.iter().enumerate() {
            if d.kind == NodeKind::Switch {
                continue;
            }
            let (a, b) = (port_off[d.sw.idx()], port_off[d.sw.idx() + 1]);
            if let Some(t) = targets[a as usize..b as usize].get_mut(d.sw_port as usize) {
                *t = Target::End { dest: i as u32 };
            }
            count[d.sw.idx() + 1] += 1;
        }
        for s in 0..n {
            count[s + 1] += count[s];
        }
        let src_off = count.clone();
        let mut sources = vec![0u32; src_off[n] as usize];
        for (i, d) in topo.dests.iter().enumerate() {
            if d.kind != NodeKind::Switch {
                let slot = &mut count[d.sw.idx()];
                sources[*slot as usize] = i as u32;
                *slot += 1;
            }
        }
        Wiring {
            port_off,
            targets,
            chans,
            src_off,
            sources,
        }
    }

    /// Number of switches.
    pub(crate) fn switches(&self) -> usize {
        self.port_off.len() - 1
    }

    /// What is behind `port` of switch `s`; `None` for a port beyond the radix.
    #[inline]
    pub(crate) fn target(&self, s: u32, port: u8) -> Option<Target> {
        let (a, b) = (self.port_off[s as usize], self.port_off[s as usize + 1]);
        self.targets[a as usize..b as usize]
            .get(port as usize)
            .copied()
    }

    /// The channel leaving switch `s` through `port`.
    #[inline]
    pub(crate) fn chan_at(&self, s: u32, port: u8) -> Option<u32> {
        match self.target(s, port) {
            Some(Target::Switch { chan, .. }) => Some(chan),
            _ => None,
        }
    }

    /// The source ports (indices into `Topo::dests`) hanging off switch `s`.
    #[inline]
    pub(crate) fn sources_at(&self, s: u32) -> &[u32] {
        let (a, b) = (self.src_off[s as usize], self.src_off[s as usize + 1]);
        &self.sources[a as usize..b as usize]
    }

    /// Every source port, grouped by switch.
    pub(crate) fn sources(&self) -> &[u32] {
        &self.sources
    }

    /// The next switch and the channel to it when switch `s` forwards out `port`.
    #[inline]
    pub(crate) fn next(&self, s: u32, port: u8) -> Option<(u32, u32)> {
        match self.target(s, port) {
            Some(Target::Switch { sw, chan }) => Some((sw, chan)),
            _ => None,
        }
    }

    /// Switch node GUID and port of a channel's two ends.
    pub(crate) fn chan_ends(&self, topo: &Topo<'_>, c: u32) -> (Guid, u8, Guid, u8) {
        let ch = self.chans[c as usize];
        (
            topo.guid(SwIdx(ch.from)),
            ch.port,
            topo.guid(SwIdx(ch.to)),
            ch.to_port,
        )
    }
}

/// Up to 64 consecutive LIDs of every switch's table, transposed: `port(s, j)` is switch
/// `s`'s entry for LID `first + j`. Missing rows and entries read as [`NO_ROUTE`].
#[derive(Debug, Clone, Default)]
pub(crate) struct Block {
    first: usize,
    buf: Vec<u8>,
}

impl Block {
    /// Loads LIDs `first .. first + 64`.
    pub(crate) fn load(&mut self, routes: &Routes, switches: usize, first: usize) {
        self.first = first;
        self.buf.clear();
        self.buf.resize(switches * BLOCK, NO_ROUTE);
        for (s, row) in routes.lft.iter().take(switches).enumerate() {
            let src = row.get(first..).unwrap_or(&[]);
            let n = src.len().min(BLOCK);
            self.buf[s * BLOCK..s * BLOCK + n].copy_from_slice(&src[..n]);
        }
    }

    /// The column of LID `first + j`.
    #[inline]
    pub(crate) fn col(&self, j: usize) -> Col<'_> {
        Col { b: self, j }
    }
}

/// One LID of a [`Block`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Col<'a> {
    b: &'a Block,
    j: usize,
}

impl Col<'_> {
    /// Switch `s`'s entry.
    #[inline]
    pub(crate) fn port(&self, s: u32) -> u8 {
        self.b.buf[s as usize * BLOCK + self.j]
    }

    /// The LID.
    pub(crate) fn lid(&self) -> Lid {
        Lid((self.b.first + self.j) as u16)
    }
}

/// Where a walk from one switch ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Step {
    pub(crate) fate: Fate,
    /// The output port at `at` (the offending entry when the walk died there).
    pub(crate) port: u8,
    /// Switch-to-switch links from this switch to `at`.
    pub(crate) hops: u32,
    /// The switch where the walk ended (delivered, died, or the first switch revisited).
    pub(crate) at: u32,
}

const UNSEEN: u8 = 0;
const ON_PATH: u8 = 1;
const DONE: u8 = 2;

/// Resolves every switch's [`Step`] for one LID. Buffers are reused across LIDs.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tracer {
    pub(crate) steps: Vec<Step>,
    mark: Vec<u8>,
    path: Vec<u32>,
}

impl Tracer {
    /// Walks from every switch towards the LID of `col`, owned by `dests[dest]` (or by nobody
    /// when `dest` is [`NONE`]).
    pub(crate) fn run(&mut self, w: &Wiring, dests: &[Dest], dest: u32, col: Col<'_>) {
        let n = w.switches();
        let blank = Step {
            fate: Fate::NoEntry,
            port: NO_ROUTE,
            hops: 0,
            at: NONE,
        };
        self.steps.clear();
        self.steps.resize(n, blank);
        self.mark.clear();
        self.mark.resize(n, UNSEEN);
        let owner_switch = dests
            .get(dest as usize)
            .filter(|d| d.kind == NodeKind::Switch)
            .map(|d| d.sw.0);
        for s0 in 0..n as u32 {
            if self.mark[s0 as usize] == DONE {
                continue;
            }
            self.path.clear();
            let mut s = s0;
            // The result at the switch after the last one on `path`.
            let end = loop {
                match self.mark[s as usize] {
                    DONE => break self.steps[s as usize],
                    ON_PATH => {
                        break Step {
                            fate: Fate::Loop,
                            port: col.port(s),
                            hops: 0,
                            at: s,
                        };
                    }
                    _ => {}
                }
                self.mark[s as usize] = ON_PATH;
                let port = col.port(s);
                let fate = if port == NO_ROUTE {
                    Fate::NoEntry
                } else {
                    match w.target(s, port) {
                        None => Fate::BadPort,
                        Some(Target::Open) => Fate::NotCabled,
                        Some(Target::Own) if owner_switch == Some(s) => Fate::Delivered,
                        Some(Target::Own) => Fate::NotOwner,
                        Some(Target::End { dest: e }) if e == dest => Fate::Delivered,
                        Some(Target::End { .. }) => Fate::WrongEndPort,
                        Some(Target::Switch { sw, .. }) => {
                            self.path.push(s);
                            s = sw;
                            continue;
                        }
                    }
                };
                let step = Step {
                    fate,
                    port,
                    hops: 0,
                    at: s,
                };
                self.steps[s as usize] = step;
                self.mark[s as usize] = DONE;
                break step;
            };
            for (k, &p) in self.path.iter().rev().enumerate() {
                self.steps[p as usize] = Step {
                    hops: end.hops.saturating_add(k as u32 + 1),
                    ..end
                };
                self.mark[p as usize] = DONE;
            }
        }
    }
}

/// Walks one path from switch `from` to the LID owned by `dests[dest]`, pushing the
/// channels it takes onto `chans`; true when it is delivered. At most one step per switch,
/// so a loop ends the walk.
pub(crate) fn walk_path(
    w: &Wiring,
    routes: &Routes,
    dests: &[Dest],
    from: u32,
    lid: Lid,
    dest: u32,
    chans: &mut Vec<u32>,
) -> bool {
    let owner_switch = dests
        .get(dest as usize)
        .filter(|d| d.kind == NodeKind::Switch)
        .map(|d| d.sw.0);
    let mut s = from;
    for _ in 0..=w.switches() {
        let port = routes
            .lft
            .get(s as usize)
            .and_then(|r| r.get(lid.0 as usize))
            .copied()
            .unwrap_or(NO_ROUTE);
        match w.target(s, port) {
            Some(Target::Switch { sw, chan }) if port != NO_ROUTE => {
                chans.push(chan);
                s = sw;
            }
            Some(Target::End { dest: e }) => return e == dest,
            Some(Target::Own) => return owner_switch == Some(s),
            _ => return false,
        }
    }
    false
}
