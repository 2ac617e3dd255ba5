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

use crate::routes::Routes;
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

/// Packed targets: a channel number, [`END`] `|` a destination index, [`OWN`] or [`OPEN`].
const OPEN: u32 = u32::MAX;
const OWN: u32 = u32::MAX - 1;
const END: u32 = 1 << 31;

/// Every switch port's target, the channels, and the source ports (CA and router ports)
/// grouped by the switch they hang off.
#[derive(Debug, Clone)]
pub(crate) struct Wiring {
    port_off: Vec<u32>,
    /// Per switch port, packed (see [`pack`]): 4 bytes, so the targets of the biggest
    /// fabrics stay in a core's cache.
    targets: Vec<u32>,
    pub(crate) chans: Vec<Chan>,
    /// `chans[c].to` and the port it leaves its tail by, alone for the same reason.
    chan_to: Vec<u32>,
    chan_port: Vec<u8>,
    /// Channel dependency sets: channel `c` owns the 64-bit words
    /// `dep_off[c] .. dep_off[c + 1]`, one bit per port of its head switch.
    dep_off: Vec<u32>,
    src_off: Vec<u32>,
    sources: Vec<u32>,
    /// Switches with at least one source, ascending.
    src_switches: Vec<u32>,
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
            targets.push(OWN);
            targets.extend(std::iter::repeat_n(OPEN, topo.radix(sw) as usize));
            for a in topo.adj(sw) {
                if let Some(t) = targets[base..].get_mut(a.port as usize) {
                    *t = chans.len() as u32;
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
                *t = END | i as u32;
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
        let src_switches = (0..n as u32)
            .filter(|&s| src_off[s as usize + 1] > src_off[s as usize])
            .collect();
        let chan_to = chans.iter().map(|c| c.to).collect();
        let chan_port = chans.iter().map(|c| c.port).collect();
        let mut dep_off = Vec::with_capacity(chans.len() + 1);
        let mut words = 0u32;
        for c in &chans {
            dep_off.push(words);
            let ports = port_off[c.to as usize + 1] - port_off[c.to as usize];
            words += ports.div_ceil(64);
        }
        dep_off.push(words);
        Wiring {
            port_off,
            targets,
            chans,
            chan_to,
            chan_port,
            dep_off,
            src_off,
            sources,
            src_switches,
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
        let t = *self.targets[a as usize..b as usize].get(port as usize)?;
        Some(match t {
            OPEN => Target::Open,
            OWN => Target::Own,
            t if t & END != 0 => Target::End { dest: t & !END },
            chan => Target::Switch {
                sw: self.chan_to[chan as usize],
                chan,
            },
        })
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

    /// Switches with at least one source, ascending.
    pub(crate) fn source_switches(&self) -> &[u32] {
        &self.src_switches
    }

    /// The switch a walk to `dests[d]` need not start from: the destination's own switch
    /// when the destination is its only source (a port does not send to itself).
    pub(crate) fn skip_for(&self, dests: &[Dest], d: u32) -> u32 {
        match dests.get(d as usize) {
            Some(dest)
                if dest.kind != NodeKind::Switch && self.sources_at(dest.sw.0).len() == 1 =>
            {
                dest.sw.0
            }
            _ => NONE,
        }
    }

    /// Every source port, grouped by switch.
    pub(crate) fn sources(&self) -> &[u32] {
        &self.sources
    }

    /// The head switch of channel `c`.
    #[inline]
    pub(crate) fn head(&self, c: u32) -> u32 {
        self.chan_to[c as usize]
    }

    /// The port channel `c` leaves its tail switch by.
    #[inline]
    pub(crate) fn tail_port(&self, c: u32) -> u8 {
        self.chan_port[c as usize]
    }

    /// The words of channel `c`'s dependency set.
    #[inline]
    pub(crate) fn dep_words(&self, c: u32) -> std::ops::Range<usize> {
        self.dep_off[c as usize] as usize..self.dep_off[c as usize + 1] as usize
    }

    /// Words of all dependency sets together.
    pub(crate) fn dep_len(&self) -> usize {
        self.dep_off.last().copied().unwrap_or(0) as usize
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
    /// The switch where the walk ended (delivered or died there; for a loop, a switch of
    /// the loop).
    pub(crate) at: u32,
    /// The channel this switch forwards the LID on ([`NONE`] when it does not forward it
    /// to a switch).
    pub(crate) chan: u32,
}

/// Resolves the [`Step`]s of one LID for the switches walks from given start switches
/// pass. Buffers are reused across LIDs; only `visited` switches have valid steps.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tracer {
    pub(crate) steps: Vec<Step>,
    /// Switches resolved by the last run, each once.
    pub(crate) visited: Vec<u32>,
    /// `stamp[s]` = `epoch` while `s` is on the current path, `epoch + 1` once resolved.
    stamp: Vec<u32>,
    epoch: u32,
    path: Vec<u32>,
}

impl Tracer {
    /// Walks towards the LID of `col`, owned by `dests[dest]` (or by nobody when `dest` is
    /// [`NONE`]), from every switch of `starts` but `skip`, and from every switch those
    /// walks pass.
    pub(crate) fn run(
        &mut self,
        w: &Wiring,
        dests: &[Dest],
        dest: u32,
        col: Col<'_>,
        starts: &[u32],
        skip: u32,
    ) {
        let n = w.switches();
        if self.stamp.len() != n || self.epoch >= u32::MAX - 2 {
            self.stamp.clear();
            self.stamp.resize(n, 0);
            self.epoch = 0;
            let blank = Step {
                fate: Fate::NoEntry,
                port: NO_ROUTE,
                hops: 0,
                at: NONE,
                chan: NONE,
            };
            self.steps.clear();
            self.steps.resize(n, blank);
        }
        self.epoch += 2;
        let (on_path, done) = (self.epoch, self.epoch + 1);
        self.visited.clear();
        let owner_switch = dests
            .get(dest as usize)
            .filter(|d| d.kind == NodeKind::Switch)
            .map(|d| d.sw.0);
        for &s0 in starts {
            if s0 == skip || self.stamp[s0 as usize] == done {
                continue;
            }
            self.path.clear();
            let mut s = s0;
            // The result at the switch after the last one on `path`.
            let end = loop {
                let st = self.stamp[s as usize];
                if st == done {
                    break self.steps[s as usize];
                }
                if st == on_path {
                    break Step {
                        fate: Fate::Loop,
                        port: col.port(s),
                        hops: 0,
                        at: s,
                        chan: NONE,
                    };
                }
                self.stamp[s as usize] = on_path;
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
                        Some(Target::Switch { sw, chan }) => {
                            self.steps[s as usize].chan = chan;
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
                    chan: NONE,
                };
                self.steps[s as usize] = step;
                self.stamp[s as usize] = done;
                self.visited.push(s);
                break step;
            };
            for (k, &p) in self.path.iter().rev().enumerate() {
                let step = &mut self.steps[p as usize];
                *step = Step {
                    hops: end.hops.saturating_add(k as u32 + 1),
                    chan: step.chan,
                    ..end
                };
                self.stamp[p as usize] = done;
                self.visited.push(p);
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
