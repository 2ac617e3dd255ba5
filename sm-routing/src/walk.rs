//! Walking forwarding tables without trusting them: what is behind every switch port, and
//! for one destination LID the fate of a packet at every switch, found by memoised pointer
//! chasing (each switch is resolved once per LID, so a LID costs O(switches)). Shared by
//! validation and metrics.
//!
//! Tables are read through 64-LID blocks transposed to `[switch][lid]` ([`Block`]): a
//! destination LID's column then sits in one small buffer instead of one cache line of
//! every switch's table.

use sm_core::NodeKind;
use sm_core::dump::NO_ROUTE;
use sm_core::idx::{IdxVec, OptIdx};
use sm_mad::{Guid, Lid};

use crate::routes::Routes;
use crate::topo::{Dest, DestIdx, SwIdx, Topo};
use sm_core::lft::LftTable;

sm_core::dense_index!(
    /// A channel, one direction of a switch-to-switch link: an index into [`Wiring::chans`].
    pub(crate) struct ChanIdx
);

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
    /// A link to switch `sw`, forming channel `chan`.
    Switch { sw: SwIdx, chan: ChanIdx },
    /// A link to an end port.
    End { dest: DestIdx },
    /// No link.
    Open,
}

/// A channel: one direction of a switch-to-switch link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Chan {
    pub(crate) from: SwIdx,
    pub(crate) port: u8,
    pub(crate) to: SwIdx,
    pub(crate) to_port: u8,
}

/// Packed targets: a channel number, [`END`] `|` a destination index, [`OWN`] or [`OPEN`].
/// Raw numbers rather than a [`Target`]: 4 bytes a port keep the targets of the biggest
/// fabrics in a core's cache.
const OPEN: u32 = u32::MAX;
const OWN: u32 = u32::MAX - 1;
const END: u32 = 1 << 31;

/// Every switch port's target, the channels, and the source ports (CA and router ports)
/// grouped by the switch they hang off.
#[derive(Debug, Clone)]
pub(crate) struct Wiring {
    /// Switch `s`'s ports are `targets[port_off[s]..port_off[s + 1]]`.
    port_off: Vec<u32>,
    /// Per switch port, packed (see [`OPEN`]).
    targets: Vec<u32>,
    pub(crate) chans: IdxVec<ChanIdx, Chan>,
    /// `chans[c].to` and the port it leaves its tail by, alone for the same reason.
    chan_to: IdxVec<ChanIdx, SwIdx>,
    chan_port: IdxVec<ChanIdx, u8>,
    /// Channel dependency sets: channel `c` owns the 64-bit words
    /// `dep_off[c] .. dep_off[c + 1]`, one bit per port of its head switch.
    dep_off: Vec<u32>,
    /// Switch `s`'s sources are `sources[src_off[s]..src_off[s + 1]]`.
    src_off: Vec<u32>,
    sources: Vec<DestIdx>,
    /// Switches with at least one source, ascending.
    src_switches: Vec<SwIdx>,
}

impl Wiring {
    pub(crate) fn new(topo: &Topo<'_>) -> Wiring {
        let n = topo.num_switches();
        let mut port_off = Vec::with_capacity(n + 1);
        let mut targets = Vec::new();
        let mut chans: IdxVec<ChanIdx, Chan> = IdxVec::new();
        for sw in (0..n as u32).map(SwIdx) {
            port_off.push(targets.len() as u32);
            let base = targets.len();
            targets.push(OWN);
            targets.extend(std::iter::repeat_n(OPEN, topo.radix(sw) as usize));
            for a in topo.adj(sw) {
                if let Some(t) = targets[base..].get_mut(a.port as usize) {
                    *t = chans
                        .push(Chan {
                            from: sw,
                            port: a.port,
                            to: a.peer,
                            to_port: a.peer_port,
                        })
                        .0;
                }
            }
        }
        port_off.push(targets.len() as u32);
        let mut count = vec![0u32; n + 1];
        for (i, d) in topo.dests.iter_enumerated() {
            if d.kind == NodeKind::Switch {
                continue;
            }
            let (a, b) = (port_off[d.sw.idx()], port_off[d.sw.idx() + 1]);
            if let Some(t) = targets[a as usize..b as usize].get_mut(d.sw_port as usize) {
                *t = END | i.0;
            }
            count[d.sw.idx() + 1] += 1;
        }
        for s in 0..n {
            count[s + 1] += count[s];
        }
        let src_off = count.clone();
        let mut sources = vec![DestIdx(0); src_off[n] as usize];
        for (i, d) in topo.dests.iter_enumerated() {
            if d.kind != NodeKind::Switch {
                let slot = &mut count[d.sw.idx()];
                sources[*slot as usize] = i;
                *slot += 1;
            }
        }
        let src_switches = (0..n as u32)
            .filter(|&s| src_off[s as usize + 1] > src_off[s as usize])
            .map(SwIdx)
            .collect();
        let chan_to = chans.iter().map(|c| c.to).collect();
        let chan_port = chans.iter().map(|c| c.port).collect();
        let mut dep_off = Vec::with_capacity(chans.len() + 1);
        let mut words = 0u32;
        for c in &chans {
            dep_off.push(words);
            let ports = port_off[c.to.idx() + 1] - port_off[c.to.idx()];
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

    /// Every switch, in order.
    pub(crate) fn switch_indices(&self) -> impl Iterator<Item = SwIdx> + use<> {
        (0..self.switches() as u32).map(SwIdx)
    }

    /// What is behind `port` of switch `s`; `None` for a port beyond the radix.
    #[inline]
    pub(crate) fn target(&self, s: SwIdx, port: u8) -> Option<Target> {
        let (a, b) = (self.port_off[s.idx()], self.port_off[s.idx() + 1]);
        let t = *self.targets[a as usize..b as usize].get(port as usize)?;
        Some(match t {
            OPEN => Target::Open,
            OWN => Target::Own,
            t if t & END != 0 => Target::End {
                dest: DestIdx(t & !END),
            },
            chan => {
                let chan = ChanIdx(chan);
                Target::Switch {
                    sw: self.chan_to[chan],
                    chan,
                }
            }
        })
    }

    /// The channel leaving switch `s` through `port`.
    #[inline]
    pub(crate) fn chan_at(&self, s: SwIdx, port: u8) -> Option<ChanIdx> {
        match self.target(s, port) {
            Some(Target::Switch { chan, .. }) => Some(chan),
            _ => None,
        }
    }

    /// The source ports hanging off switch `s`.
    #[inline]
    pub(crate) fn sources_at(&self, s: SwIdx) -> &[DestIdx] {
        let (a, b) = (self.src_off[s.idx()], self.src_off[s.idx() + 1]);
        &self.sources[a as usize..b as usize]
    }

    /// Switches with at least one source, ascending.
    pub(crate) fn source_switches(&self) -> &[SwIdx] {
        &self.src_switches
    }

    /// The switch a walk to `dests[d]` need not start from: the destination's own switch
    /// when the destination is its only source (a port does not send to itself).
    pub(crate) fn skip_for(&self, dests: &IdxVec<DestIdx, Dest>, d: DestIdx) -> Option<SwIdx> {
        dests
            .get(d)
            .filter(|dest| dest.kind != NodeKind::Switch && self.sources_at(dest.sw).len() == 1)
            .map(|dest| dest.sw)
    }

    /// Every source port, grouped by switch.
    pub(crate) fn sources(&self) -> &[DestIdx] {
        &self.sources
    }

    /// The head switch of channel `c`.
    #[inline]
    pub(crate) fn head(&self, c: ChanIdx) -> SwIdx {
        self.chan_to[c]
    }

    /// The port channel `c` leaves its tail switch by.
    #[inline]
    pub(crate) fn tail_port(&self, c: ChanIdx) -> u8 {
        self.chan_port[c]
    }

    /// The words of channel `c`'s dependency set.
    #[inline]
    pub(crate) fn dep_words(&self, c: ChanIdx) -> std::ops::Range<usize> {
        self.dep_off[c.idx()] as usize..self.dep_off[c.idx() + 1] as usize
    }

    /// Words of all dependency sets together.
    pub(crate) fn dep_len(&self) -> usize {
        self.dep_off.last().copied().unwrap_or(0) as usize
    }

    /// Switch node GUID and port of a channel's two ends.
    pub(crate) fn chan_ends(&self, topo: &Topo<'_>, c: ChanIdx) -> (Guid, u8, Guid, u8) {
        let ch = self.chans[c];
        (topo.guid(ch.from), ch.port, topo.guid(ch.to), ch.to_port)
    }
}

/// Up to 64 consecutive LIDs of every switch's table, transposed: `port(s, j)` is switch
/// `s`'s entry for LID `first + j`. Missing rows and entries read as [`NO_ROUTE`].
#[derive(Debug, Clone, Default)]
pub(crate) struct Block {
    first: usize,
    buf: Vec<u8>,
}

/// Every switch's forwarding table, as an engine returns them ([`Routes::lft`]) or as the
/// SM keeps them ([`LftTable`]): validation reads either without a copy.
#[derive(Debug, Clone, Copy)]
pub enum Tables<'a> {
    Rows(&'a [Vec<u8>]),
    Chunked(&'a [LftTable]),
}

impl<'a> From<&'a Routes> for Tables<'a> {
    fn from(r: &'a Routes) -> Tables<'a> {
        Tables::Rows(&r.lft)
    }
}

impl Tables<'_> {
    /// The longest table.
    pub(crate) fn max_len(&self) -> usize {
        match self {
            Tables::Rows(r) => r.iter().map(Vec::len).max().unwrap_or(0),
            Tables::Chunked(t) => t.iter().map(LftTable::len).max().unwrap_or(0),
        }
    }

    /// Switch `s`'s entry for `lid` ([`NO_ROUTE`] past its table).
    #[inline]
    pub(crate) fn entry(&self, s: SwIdx, lid: usize) -> u8 {
        match self {
            Tables::Rows(r) => r.get(s.idx()).and_then(|t| t.get(lid)).copied(),
            Tables::Chunked(t) => t.get(s.idx()).and_then(|t| t.get(lid)),
        }
        .unwrap_or(NO_ROUTE)
    }

    /// Up to `out.len()` entries of switch `s` from `first` on (a run within one aligned
    /// block), copied into `out`; how many.
    fn copy_run(&self, s: usize, first: usize, out: &mut [u8]) -> usize {
        let src = match self {
            Tables::Rows(r) => r.get(s).and_then(|t| t.get(first..)).unwrap_or(&[]),
            Tables::Chunked(t) => t.get(s).map_or(&[][..], |t| t.run(first, out.len())),
        };
        let n = src.len().min(out.len());
        out[..n].copy_from_slice(&src[..n]);
        n
    }
}

impl Block {
    /// Loads LIDs `first .. first + 64` (`first` a multiple of 64).
    pub(crate) fn load(&mut self, tables: Tables<'_>, switches: usize, first: usize) {
        self.first = first;
        self.buf.clear();
        self.buf.resize(switches * BLOCK, NO_ROUTE);
        for s in 0..switches {
            tables.copy_run(s, first, &mut self.buf[s * BLOCK..s * BLOCK + BLOCK]);
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
    pub(crate) fn port(&self, s: SwIdx) -> u8 {
        self.b.buf[s.idx() * BLOCK + self.j]
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
    pub(crate) at: SwIdx,
    /// The channel this switch forwards the LID on (none when it does not forward it to a
    /// switch).
    pub(crate) chan: OptIdx<ChanIdx>,
}

/// Resolves the [`Step`]s of one LID for the switches walks from given start switches
/// pass. Buffers are reused across LIDs; only `visited` switches have valid steps.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tracer {
    pub(crate) steps: IdxVec<SwIdx, Step>,
    /// Switches resolved by the last run, each once.
    pub(crate) visited: Vec<SwIdx>,
    /// `stamp[s]` = `epoch` while `s` is on the current path, `epoch + 1` once resolved.
    stamp: IdxVec<SwIdx, u32>,
    epoch: u32,
    path: Vec<SwIdx>,
}

impl Tracer {
    /// Walks towards the LID of `col`, owned by `dests[dest]` (or by nobody), from every
    /// switch of `starts` but `skip`, and from every switch those walks pass.
    pub(crate) fn run(
        &mut self,
        w: &Wiring,
        dests: &IdxVec<DestIdx, Dest>,
        dest: Option<DestIdx>,
        col: Col<'_>,
        starts: &[SwIdx],
        skip: Option<SwIdx>,
    ) {
        let n = w.switches();
        if self.stamp.len() != n || self.epoch >= u32::MAX - 2 {
            self.stamp = IdxVec::filled(0, n);
            self.epoch = 0;
            // Never read: a step is written before its switch counts as visited.
            let blank = Step {
                fate: Fate::NoEntry,
                port: NO_ROUTE,
                hops: 0,
                at: SwIdx(0),
                chan: OptIdx::NONE,
            };
            self.steps = IdxVec::filled(blank, n);
        }
        self.epoch += 2;
        let (on_path, done) = (self.epoch, self.epoch + 1);
        self.visited.clear();
        let owner_switch = dest
            .and_then(|d| dests.get(d))
            .filter(|d| d.kind == NodeKind::Switch)
            .map(|d| d.sw);
        for &s0 in starts {
            if Some(s0) == skip || self.stamp[s0] == done {
                continue;
            }
            self.path.clear();
            let mut s = s0;
            // The result at the switch after the last one on `path`.
            let end = loop {
                let st = self.stamp[s];
                if st == done {
                    break self.steps[s];
                }
                if st == on_path {
                    break Step {
                        fate: Fate::Loop,
                        port: col.port(s),
                        hops: 0,
                        at: s,
                        chan: OptIdx::NONE,
                    };
                }
                self.stamp[s] = on_path;
                let port = col.port(s);
                let fate = if port == NO_ROUTE {
                    Fate::NoEntry
                } else {
                    match w.target(s, port) {
                        None => Fate::BadPort,
                        Some(Target::Open) => Fate::NotCabled,
                        Some(Target::Own) if owner_switch == Some(s) => Fate::Delivered,
                        Some(Target::Own) => Fate::NotOwner,
                        Some(Target::End { dest: e }) if Some(e) == dest => Fate::Delivered,
                        Some(Target::End { .. }) => Fate::WrongEndPort,
                        Some(Target::Switch { sw, chan }) => {
                            self.steps[s].chan = OptIdx::some(chan);
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
                    chan: OptIdx::NONE,
                };
                self.steps[s] = step;
                self.stamp[s] = done;
                self.visited.push(s);
                break step;
            };
            for (k, &p) in self.path.iter().rev().enumerate() {
                let step = &mut self.steps[p];
                *step = Step {
                    hops: end.hops.saturating_add(k as u32 + 1),
                    chan: step.chan,
                    ..end
                };
                self.stamp[p] = done;
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
    tables: Tables<'_>,
    dests: &IdxVec<DestIdx, Dest>,
    from: SwIdx,
    lid: Lid,
    dest: DestIdx,
    chans: &mut Vec<ChanIdx>,
) -> bool {
    let owner_switch = dests
        .get(dest)
        .filter(|d| d.kind == NodeKind::Switch)
        .map(|d| d.sw);
    let mut s = from;
    for _ in 0..=w.switches() {
        let port = tables.entry(s, lid.0 as usize);
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
