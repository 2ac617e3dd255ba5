//! Repairs in proportion to the damage.
//!
//! A trap 128 (a port changed state) does not start a heavy sweep. The traps of a few
//! milliseconds are gathered; the switches that sent them are looked at (the PortInfo of
//! both ends of a link between two of them, every port of a switch that trapped alone), and
//! the NodeInfo across a port that came up names what is there. What the look finds is
//! applied to the model and the plan: only the routes that used a link that went down move,
//! and those come back when it returns. Nodes that come back having lost their state (a
//! rebooted switch) are read whole and programmed again. Anything the look cannot explain (a
//! node it does not know, a question unanswered, a LID no switch holds) calls for a heavy
//! sweep instead.

use super::model::DrPath;
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::time::Duration;

use sm_core::fabric::{Fabric, NodeIdx, PortIdx};
use sm_mad::port_info::{self, PhysPortState};
use sm_mad::{Guid, Lid, MadStatus, attr, node_info, smp, switch_info};

use super::model::Discovered;
use super::plan::Plan;
use super::{Purpose, Target, Work, dest};

/// How long traps are gathered before a repair looks at them.
pub(super) const GATHER: Duration = Duration::from_millis(2);

/// A change of the fabric a repair found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LinkChange {
    /// The link between these ports went down.
    Down(PortIdx, PortIdx),
    /// These ports, unlinked in the model, are linked (again).
    Up(PortIdx, PortIdx),
}

impl LinkChange {
    /// Applies the change to a fabric (the model's or the plan's: same indices).
    pub(super) fn apply(self, f: &mut Fabric) {
        match self {
            LinkChange::Down(a, _) => {
                f.disconnect(a);
            }
            LinkChange::Up(a, b) => {
                if let Err(e) = f.connect(a, b) {
                    tracing::warn!("repair: link not taken into the model: {e}");
                }
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Reading the ports of the switches that trapped, a lone switch's a stage at a time.
    Look,
    /// Asking who is across the ports that came up or trained again, and whether a switch
    /// there kept its state.
    Identify,
    /// Reading whole the nodes that came back without their state.
    Reread,
}

/// Ports of a lone switch read together; `probes` cross some of its links and back
/// instead (each: the route, the ports it covers).
#[derive(Debug, Default)]
struct Stage {
    read: Vec<PortIdx>,
    probes: Vec<(DrPath, Vec<PortIdx>)>,
}

impl Stage {
    fn read(read: Vec<PortIdx>) -> Stage {
        Stage {
            read,
            probes: Vec::new(),
        }
    }

    fn is_empty(&self) -> bool {
        self.read.is_empty() && self.probes.is_empty()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ProbeState {
    Out,
    /// Answered: every link it covers is up.
    Passed,
    /// Unanswered: its ports are read.
    Failed,
}

/// A directed-route Get that leaves a lone switch by one of its likely ports and comes
/// back by another, several times over: one answer for several PortInfo reads.
#[derive(Debug)]
struct Probe {
    switch: NodeIdx,
    covers: Vec<PortIdx>,
    state: ProbeState,
}

/// A lone switch's likely links are probed when there are at least this many.
const PROBE_FROM: usize = 6;
/// How far apart two far ends may be (links, around the switch) to share a probe's way.
const PROBE_DETOUR: usize = 3;
/// The most switches a search for that way visits.
const DETOUR_NODES: usize = 4096;

/// What the look concluded.
#[derive(Debug)]
pub(super) enum Found {
    /// Nothing changed (a flap that is over, a duplicate trap).
    Nothing,
    /// Links changed (or trained again); these ports need their settings and states again,
    /// and `reset` are nodes that came back without their state.
    Changes {
        changes: Vec<LinkChange>,
        ports: Vec<PortIdx>,
        reset: Vec<NodeIdx>,
    },
    /// Something the look cannot explain: a heavy sweep, for this reason.
    Heavy(String),
}

/// A repair's look at the fabric.
#[derive(Debug)]
pub(super) struct Repair {
    /// What started it, for the report.
    pub(super) trigger: String,
    /// The switches that trapped.
    pub(super) trapped: BTreeSet<NodeIdx>,
    queue: VecDeque<Work>,
    step: Step,
    /// PortInfo as read now.
    reads: HashMap<PortIdx, port_info::Repr>,
    /// Who answers across a port that came up or trained again: (node GUID, its port).
    across: HashMap<PortIdx, (Guid, u8)>,
    /// SwitchInfo of switches across such a port.
    switch_infos: HashMap<NodeIdx, switch_info::Repr>,
    /// The route to each node across (through the port found up).
    paths: HashMap<NodeIdx, DrPath>,
    /// The route to each switch that trapped, back along the way its trap came.
    back: HashMap<NodeIdx, DrPath>,
    /// Ports of switches that trapped alone, left unread until the ports read before
    /// them show nothing: stages, first to read first.
    rest: Vec<(NodeIdx, VecDeque<Stage>)>,
    /// Stages of switches that trapped with a neighbour, for when the links between
    /// them show nothing (a switch they both reach went dark).
    paired_rest: Vec<(NodeIdx, VecDeque<Stage>)>,
    /// Trapped switches whose PortStateChange was set when the look began.
    fresh: BTreeSet<NodeIdx>,
    /// Switches whose PortStateChange a change already applied may have set (it was not
    /// cleared since): set, it tells nothing new.
    dirty: BTreeSet<NodeIdx>,
    probes: Vec<Probe>,
    /// Probes given up before their time (every other one of the switch answered): the
    /// core forgets them.
    pub(super) abandoned: Vec<usize>,
    /// Switches that trapped whose way back crosses a link found down: nothing sent to
    /// them along it can arrive. `doomed_new`: found so since the core last looked (it
    /// gives up their Gets in flight at once, as unanswered).
    doomed: BTreeSet<NodeIdx>,
    pub(super) doomed_new: Vec<NodeIdx>,
    /// Links read down so far, and per switch how many of its own.
    cut: Vec<[PortIdx; 2]>,
    cut_at: HashMap<NodeIdx, usize>,
    failed: Option<String>,
    /// Whether the neighbours silenced by a switch gone dark were looked for.
    orphans_read: bool,
    /// Silent switches across a link found down, whose other neighbours were read.
    pub(super) dark: BTreeSet<NodeIdx>,
    /// Ports whose PortInfo, or the NodeInfo across them, went unanswered (a route that
    /// crossed a link going down meanwhile): what they would have told is left out, and
    /// their switches are looked at again by the next repair.
    pub(super) unanswered: Vec<PortIdx>,
}

fn get(purpose: Purpose, attr_id: u16, modifier: u32, to: Target, key: u64) -> Work {
    Work {
        dest: Some(key),
        ..Work::get(purpose, attr_id, modifier, to)
    }
}

fn is_up(pi: &port_info::Repr) -> bool {
    pi.port_physical_state == PhysPortState::LinkUp
}

impl Repair {
    /// A look at the switches that hold `lids` (the issuers of the gathered traps).
    pub(super) fn start(
        m: &Discovered,
        plan: &Plan,
        lids: &BTreeSet<Lid>,
        cause: &str,
    ) -> Result<Repair, String> {
        let f = &plan.fabric;
        let mut trapped = BTreeSet::new();
        for &lid in lids {
            let node = f
                .switches()
                .find(|&n| f.port_of(n, 0).is_some_and(|p| f.port(p).lid == lid))
                .ok_or_else(|| format!("a trap came from LID {lid}, which no switch holds"))?;
            trapped.insert(node);
        }
        // A switch cut off already (its traps left it before its last links went) has
        // nothing to read; if it is back, its neighbours' traps say so.
        let cut_off: Vec<NodeIdx> = trapped.iter().copied().filter(|&n| !m.present(n)).collect();
        let mut r = Repair {
            trigger: format!(
                "{cause} from {}",
                trapped
                    .iter()
                    .map(|&n| m.fabric.node(n).guid.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            trapped,
            queue: VecDeque::new(),
            step: Step::Look,
            reads: HashMap::new(),
            across: HashMap::new(),
            switch_infos: HashMap::new(),
            paths: HashMap::new(),
            back: HashMap::new(),
            rest: Vec::new(),
            paired_rest: Vec::new(),
            fresh: BTreeSet::new(),
            dirty: BTreeSet::new(),
            probes: Vec::new(),
            abandoned: Vec::new(),
            doomed: BTreeSet::new(),
            doomed_new: Vec::new(),
            cut: Vec::new(),
            cut_at: HashMap::new(),
            failed: None,
            orphans_read: false,
            dark: BTreeSet::new(),
            unanswered: Vec::new(),
        };
        for n in cut_off {
            r.trapped.remove(&n);
        }
        for &s in &r.trapped {
            if let Some(path) = plan.route_back(m.own, s) {
                r.back.insert(s, path);
            }
        }
        // PortStateChange is cleared before anything is read: a change after the reads
        // sets it again (a Set sent first reaches the switch first along the same way).
        for &s in &r.trapped {
            let (Some(p0), Some(mut si)) = (f.port_of(s, 0), m.nodes[s].switch_info) else {
                continue;
            };
            si.port_state_change = true;
            let Some(data) = super::plan::emit_data(&si) else {
                continue;
            };
            let guid = m.fabric.node(s).guid;
            // Where a loss is known already, whether the bit was set tells a new change
            // from that loss's trap come late: read first (along one way, the Get is
            // answered before the Set clears it).
            let known_loss = f
                .node_ports(s)
                .any(|p| m.fabric.port(p).remote.is_none() && m.former_peer(p).is_some());
            if known_loss {
                r.queue.push_back(Work {
                    dest: Some(dest::node(guid)),
                    ..Work::get(
                        Purpose::RepairClearPsc { node: s, get: true },
                        attr::SWITCH_INFO,
                        0,
                        r.target(m, p0),
                    )
                });
            }
            r.queue.push_back(Work {
                dest: Some(dest::node(guid)),
                ..Work::set(
                    Purpose::RepairClearPsc {
                        node: s,
                        get: false,
                    },
                    attr::SWITCH_INFO,
                    0,
                    r.target(m, p0),
                    data,
                )
            });
        }
        let (now, lone, paired) = r.candidates(m, plan);
        r.paired_rest = paired;
        for port in now {
            let key = dest::node(m.fabric.node(m.fabric.port(port).node).guid);
            r.read_port(m, port, r.target(m, port), key);
        }
        for (s, mut stages) in lone {
            if let Some(first) = stages.pop_front() {
                r.begin(m, s, first);
            }
            if !stages.is_empty() {
                r.rest.push((s, stages));
            }
        }
        Ok(r)
    }

    /// Switches whose PortStateChange a change already applied may have set.
    pub(super) fn dirty(&mut self, dirty: &BTreeSet<NodeIdx>) {
        self.dirty.clone_from(dirty);
    }

    /// Switches a light sweep found without their tables (`emptied`, with the SwitchInfo
    /// read): rebooted, to be read and programmed whole.
    pub(super) fn emptied(
        &mut self,
        m: &Discovered,
        emptied: std::collections::BTreeMap<NodeIdx, switch_info::Repr>,
    ) {
        for (n, si) in emptied {
            if m.present(n) {
                self.switch_infos.insert(n, si);
                self.paths.insert(n, m.nodes[n].path);
            }
        }
    }

    /// Where to send a Get about port `p`: along its trap's way back for a switch that
    /// trapped, else the model's route.
    fn target(&self, m: &Discovered, p: PortIdx) -> Target {
        match self.back.get(&m.fabric.port(p).node) {
            Some(&path) => Target::Path(path),
            None => Target::Port(p),
        }
    }

    /// The route to the agent of port `p` (see [`Repair::target`]).
    fn route_to(&self, m: &Discovered, p: PortIdx) -> Option<DrPath> {
        self.back
            .get(&m.fabric.port(p).node)
            .copied()
            .or_else(|| m.route_to(p))
    }

    /// The ports worth reading: both ends of every link (present, or gone down before)
    /// between two switches that trapped. Of a switch that trapped alone, in stages:
    /// first the ports whose loss a repair saw (the trap may repeat that loss: its first
    /// copy could not reach us); then the ports whose far end could not have told us: one
    /// to a CA or to a node cut off, one whose far switch sends the SM's LID across it
    /// (its trap died with the link); then the rest, ports never linked among them. Likely links between switches, when many, are probed rather than
    /// read; then come the likely ports to CAs, then the probed ports (only if the probes
    /// and reads before show nothing). Returns the ports to read now and the lone
    /// switches' stages.
    #[allow(clippy::type_complexity)]
    fn candidates(
        &self,
        m: &Discovered,
        plan: &Plan,
    ) -> (
        Vec<PortIdx>,
        Vec<(NodeIdx, VecDeque<Stage>)>,
        Vec<(NodeIdx, VecDeque<Stage>)>,
    ) {
        let f = &m.fabric;
        let sm_lid = usize::from(m.own_lid().0);
        // A port never linked (no former peer: the lost ones are taken apart first) is
        // read last: a new cable is rarer than a change of one known, and an unused
        // switch's ports are many (a core of a tree with few pods).
        let likely = |p: PortIdx| {
            let Some(r) = f.port(p).remote else {
                return false;
            };
            let t = f.port(r).node;
            !m.is_switch(t)
                || !m.present(t)
                || plan
                    .lft(t)
                    .and_then(|l| l.get(sm_lid))
                    .is_none_or(|e| e == f.port(r).num)
        };
        let mut out = Vec::new();
        let mut lone = Vec::new();
        let mut paired_stages = Vec::new();
        for &s in &self.trapped {
            let paired: Vec<PortIdx> = f
                .node_ports(s)
                .filter(|&p| {
                    let peer = f.port(p).remote.or_else(|| m.former_peer(p));
                    f.port(p).num != 0
                        && peer.is_some_and(|r| {
                            let t = f.port(r).node;
                            t != s && self.trapped.contains(&t)
                        })
                })
                .collect();
            {
                let (lost, others): (Vec<PortIdx>, Vec<PortIdx>) = f
                    .node_ports(s)
                    .filter(|&p| f.port(p).num != 0 && !paired.contains(&p))
                    .partition(|&p| f.port(p).remote.is_none() && m.former_peer(p).is_some());
                let (first, rest): (Vec<PortIdx>, Vec<PortIdx>) =
                    others.into_iter().partition(|&p| likely(p));
                let (probes, first) = self.plan_probes(m, s, first);
                let covered = probes.iter().flat_map(|(_, c)| c.iter().copied()).collect();
                // With links worth probing, hosts' ports wait for the probes (on the SM's
                // leaf, its spines' links are probed first).
                let (hosts, first): (Vec<PortIdx>, Vec<PortIdx>) =
                    first.into_iter().partition(|&p| {
                        !probes.is_empty()
                            && f.port(p)
                                .remote
                                .is_some_and(|r| !m.is_switch(f.port(r).node))
                    });
                let first = Stage {
                    read: first,
                    probes,
                };
                let stages: VecDeque<Stage> = [
                    Stage::read(lost),
                    first,
                    Stage::read(hosts),
                    Stage::read(covered),
                    Stage::read(rest),
                ]
                .into_iter()
                .filter(|st| !st.is_empty())
                .collect();
                if paired.is_empty() {
                    lone.push((s, stages));
                } else {
                    paired_stages.push((s, stages));
                    out.extend(paired);
                }
            }
        }
        out.sort();
        out.dedup();
        (out, lone, paired_stages)
    }

    /// Probes for the likely ports of lone switch `s`: each leaves by one port of a
    /// pair, finds its way (at most [`PROBE_DETOUR`] links, around `s`) to the other's far
    /// end and comes back in; a probe chains about the square root of the ports' count
    /// (so its ports, read if it fails, cost about what the probes did). Ports to a CA,
    /// down, not ACTIVE or unpaired are returned to be read.
    fn plan_probes(
        &self,
        m: &Discovered,
        s: NodeIdx,
        likely: Vec<PortIdx>,
    ) -> (Vec<(DrPath, Vec<PortIdx>)>, Vec<PortIdx>) {
        use sm_mad::port_info::PortState;
        let f = &m.fabric;
        let far = |p: PortIdx| {
            let r = f.port(p).remote?;
            let t = f.port(r).node;
            let active = m.port_info(p).map(|pi| pi.port_state) == Some(PortState::Active);
            (active && t != s && m.is_switch(t) && m.present(t)).then_some((r, t))
        };
        let (links, mut read): (Vec<PortIdx>, Vec<PortIdx>) =
            likely.into_iter().partition(|&p| far(p).is_some());
        let base = f.port_of(s, 0).and_then(|p0| self.route_to(m, p0));
        let (Some(base), true) = (base, links.len() >= PROBE_FROM) else {
            read.extend(links);
            return (Vec::new(), read);
        };
        // Pairs, each with its hops from `s` back to `s`.
        let mut left: VecDeque<PortIdx> = links.into();
        let mut pairs: Vec<(Vec<u8>, [PortIdx; 2])> = Vec::new();
        while let Some(a) = left.pop_front() {
            let Some((_, ta)) = far(a) else { continue };
            let found = left.iter().take(8).enumerate().find_map(|(i, &b)| {
                let (rb, tb) = far(b)?;
                let way = detour(m, ta, tb, s)?;
                let mut hops = vec![f.port(a).num];
                hops.extend(way);
                hops.push(f.port(rb).num);
                Some((i, hops, b))
            });
            match found {
                Some((i, hops, b)) => {
                    left.remove(i);
                    pairs.push((hops, [a, b]));
                }
                None => read.push(a),
            }
        }
        let ports = pairs.len() * 2;
        let per_probe = ports.isqrt().max(2).div_ceil(2);
        let mut probes = Vec::new();
        for chunk in pairs.chunks(per_probe) {
            let mut path = base;
            let mut covers = Vec::new();
            for (hops, pair) in chunk {
                if path.len() + hops.len() > DrPath::CAPACITY {
                    read.extend(pair);
                    continue;
                }
                for &h in hops {
                    let _ = path.push(h);
                }
                covers.extend(pair);
            }
            if !covers.is_empty() {
                probes.push((path, covers));
            }
        }
        (probes, read)
    }

    /// Starts a stage of lone switch `s`: its reads and its probes.
    fn begin(&mut self, m: &Discovered, s: NodeIdx, stage: Stage) {
        let guid = m.fabric.node(s).guid;
        for p in stage.read {
            if !self.reads.contains_key(&p) {
                self.read_port(m, p, self.target(m, p), dest::node(guid));
            }
        }
        for (path, covers) in stage.probes {
            let probe = self.probes.len();
            self.probes.push(Probe {
                switch: s,
                covers,
                state: ProbeState::Out,
            });
            self.queue.push_back(Work {
                dest: Some(dest::probe(guid, probe)),
                // A probe that fails is answered by reading its ports, not by trying again.
                retries: Some(0),
                key: super::mkeys::KeyHolder::Guid(guid),
                ..Work::get(
                    Purpose::RepairProbe { probe },
                    attr::NODE_INFO,
                    0,
                    Target::Path(path),
                )
            });
        }
    }

    /// A probe came back (`passed`) or did not. One that did not has its ports read; when
    /// every other probe of its switch came back, the last one out is taken for failed at
    /// once (a link is down somewhere: it is on that probe's way).
    fn probe_done(&mut self, m: &Discovered, probe: usize, passed: bool) {
        let Some(pr) = self.probes.get_mut(probe) else {
            return;
        };
        if pr.state != ProbeState::Out {
            return;
        }
        let s = pr.switch;
        if !passed {
            return self.probe_failed(m, probe);
        }
        pr.state = ProbeState::Passed;
        let mut not_passed = self
            .probes
            .iter()
            .enumerate()
            .filter(|(_, p)| p.switch == s && p.state != ProbeState::Passed);
        if let (Some((last, p)), None) = (not_passed.next(), not_passed.next()) {
            if p.state == ProbeState::Out {
                self.abandoned.push(last);
                self.probe_failed(m, last);
            }
        }
    }

    fn probe_failed(&mut self, m: &Discovered, probe: usize) {
        let Some(pr) = self.probes.get_mut(probe) else {
            return;
        };
        pr.state = ProbeState::Failed;
        let (s, covers) = (pr.switch, pr.covers.clone());
        let key = dest::node(m.fabric.node(s).guid);
        for p in covers {
            if !self.reads.contains_key(&p) {
                self.read_port(m, p, self.target(m, p), key);
            }
        }
    }

    /// The link at `port` is down. A switch that trapped with two or more of its own
    /// links read down has likely gone dark (its traps left before its last links went):
    /// if its way back crosses a link read down, nothing sent that way arrives. (One
    /// link down on the way may be a flap that is over before a retry.)
    fn link_down(&mut self, m: &Discovered, port: PortIdx) {
        let f = &m.fabric;
        let Some(far) = f.port(port).remote else {
            return;
        };
        self.cut.push([port, far]);
        for q in [port, far] {
            *self.cut_at.entry(f.port(q).node).or_default() += 1;
        }
        for (&s, path) in &self.back {
            if self.doomed.contains(&s) || self.cut_at.get(&s).copied().unwrap_or(0) < 2 {
                continue;
            }
            let mut at = m.own;
            let crosses = path.iter().any(|&exit| {
                let Some(out) = f.port_of(f.port(at).node, exit) else {
                    return false;
                };
                let hit = self.cut.iter().any(|c| c.contains(&out));
                at = f.port(out).remote.unwrap_or(out);
                hit
            });
            if crosses {
                self.doomed.insert(s);
                self.doomed_new.push(s);
            }
        }
    }

    /// Whether a Get about `port` cannot arrive (its switch's way back is cut).
    pub(super) fn is_doomed(&self, m: &Discovered, port: PortIdx) -> bool {
        self.doomed.contains(&m.fabric.port(port).node)
    }

    fn read_port(&mut self, m: &Discovered, port: PortIdx, to: Target, key: u64) {
        if self.is_doomed(m, port) {
            self.unanswered.push(port);
            return;
        }
        let num = u32::from(m.fabric.port(port).num);
        self.queue.push_back(get(
            Purpose::RepairPortInfo { port },
            attr::PORT_INFO,
            num,
            to,
            key,
        ));
    }

    /// The next Get to send.
    pub(super) fn next_work(&mut self) -> Option<Work> {
        self.queue.pop_front()
    }

    /// A Get went unanswered. A port's state, or who is across it, is asked again by
    /// the next repair; anything else leaves the look untrustworthy.
    pub(super) fn on_lost(&mut self, m: &Discovered, w: &Work) {
        match w.purpose {
            Purpose::RepairPortInfo { port } | Purpose::RepairNodeInfo { port } => {
                self.unanswered.push(port);
            }
            Purpose::RepairProbe { probe } => self.probe_done(m, probe, false),
            // Not known to repeat an old change.
            Purpose::RepairClearPsc { node, get: true } => {
                self.fresh.insert(node);
            }
            // Left set: the light sweep looks again.
            Purpose::RepairClearPsc { .. } => {}
            _ => {
                self.failed
                    .get_or_insert_with(|| format!("the repair's {:?} went unanswered", w.purpose));
            }
        }
    }

    /// An answer to one of the look's Gets.
    pub(super) fn on_answer(&mut self, m: &Discovered, purpose: Purpose, s: &smp::Repr) {
        if let Purpose::RepairProbe { probe } = purpose {
            // It came back to the switch it left, or the model is wrong on its way.
            let home = self.probes.get(probe).map(|p| m.fabric.node(p.switch).guid);
            let passed = s.status == MadStatus::OK
                && s.attribute::<node_info::Repr>()
                    .is_ok_and(|ni| Some(ni.node_guid) == home);
            return self.probe_done(m, probe, passed);
        }
        if let Purpose::RepairClearPsc { node, get } = purpose {
            let set = s
                .attribute::<switch_info::Repr>()
                .map_or(true, |si| si.port_state_change);
            if get && (s.status != MadStatus::OK || set) {
                self.fresh.insert(node);
            }
            return;
        }
        if s.status != MadStatus::OK {
            self.failed
                .get_or_insert_with(|| format!("{purpose:?}: status {:#06x}", s.status.0));
            return;
        }
        match purpose {
            Purpose::RepairPortInfo { port } => {
                if let Ok(pi) = s.attribute::<port_info::Repr>() {
                    if !is_up(&pi) {
                        self.link_down(m, port);
                    }
                    self.reads.insert(port, pi);
                }
            }
            Purpose::RepairNodeInfo { port } => {
                let Ok(ni) = s.attribute::<node_info::Repr>() else {
                    return;
                };
                self.across.insert(port, (ni.node_guid, ni.local_port_num));
                let Some(n) = m.fabric.node_by_guid(ni.node_guid) else {
                    return;
                };
                // The first port found up across to a node gives the route to it; the
                // node's end of every such link is read (a switch whose links all came
                // back is seen across each of them).
                let first = !self.paths.contains_key(&n);
                if first {
                    let mut path = self.route_to(m, port).unwrap_or_default();
                    if !path.push(m.fabric.port(port).num) {
                        return;
                    }
                    self.paths.insert(n, path);
                }
                let Some(&path) = self.paths.get(&n) else {
                    return;
                };
                let key = dest::node(ni.node_guid);
                let far = m
                    .fabric
                    .port_of(n, ni.local_port_num)
                    .filter(|q| !self.reads.contains_key(q));
                if m.is_switch(n) {
                    // Did it keep its state? Its LinearFDBTop says. Its port's state is
                    // what the move to ACTIVE starts from: both ends must be ARMED.
                    if first {
                        self.queue.push_back(get(
                            Purpose::RepairSwitchInfo { node: n },
                            attr::SWITCH_INFO,
                            0,
                            Target::Path(path),
                            key,
                        ));
                    }
                    if let Some(q) = far {
                        self.read_port(m, q, Target::Path(path), key);
                    }
                } else if let Some(q) = far.filter(|_| first) {
                    // A host's port: its LID says whether it kept its state.
                    self.read_port(m, q, Target::Path(path), key);
                }
            }
            Purpose::RepairSwitchInfo { node } => {
                if let Ok(si) = s.attribute::<switch_info::Repr>() {
                    self.switch_infos.insert(node, si);
                }
            }
            _ => {}
        }
    }

    /// When the look has nothing more to ask: what it found. `None`: it asked more.
    pub(super) fn conclude(&mut self, m: &Discovered, plan: &Plan) -> Option<Found> {
        if let Some(why) = self.failed.take() {
            return Some(Found::Heavy(why));
        }
        let f = &m.fabric;
        if self.step == Step::Look {
            // A lone switch whose ports read so far show no change: the change is in
            // its next stage.
            let mut lone = std::mem::take(&mut self.rest);
            // Switches that trapped with a neighbour whose shared links show nothing: the
            // change is elsewhere on them (a switch both reach went dark), looked for as
            // for a switch that trapped alone.
            for (s, mut stages) in std::mem::take(&mut self.paired_rest) {
                let changed = f
                    .node_ports(s)
                    .any(|p| self.reads.get(&p).is_some_and(|pi| differs(m, p, pi)));
                if !changed {
                    if let Some(first) = stages.pop_front() {
                        self.begin(m, s, first);
                    }
                    if !stages.is_empty() {
                        lone.push((s, stages));
                    }
                }
            }
            for (s, stages) in &mut lone {
                let s = *s;
                let changed = f
                    .node_ports(s)
                    .any(|p| self.reads.get(&p).is_some_and(|pi| differs(m, p, pi)));
                // A trap that repeats a link loss already repaired (the first one could
                // not reach us) is explained by it; the light sweep is the backstop.
                // Unless its PortStateChange was set: then something changed since the
                // last look cleared it.
                let new_change = self.fresh.contains(&s) && !self.dirty.contains(&s);
                let known = !new_change
                    && f.node_ports(s).any(|p| {
                        f.port(p).remote.is_none()
                            && m.former_peer(p).is_some()
                            && self.reads.get(&p).is_some_and(|pi| !is_up(pi))
                    });
                if changed || known {
                    stages.clear();
                } else if let Some(next) = stages.pop_front() {
                    self.begin(m, s, next);
                }
            }
            lone.retain(|(_, stages)| !stages.is_empty());
            self.rest = lone;
            if self.queue.is_empty() && self.rest.is_empty() && !self.orphans_read {
                self.orphans_read = true;
                self.read_orphans(m, plan);
            }
            if !self.queue.is_empty() {
                return None;
            }
        }
        match self.step {
            Step::Look => {
                self.step = Step::Identify;
                // Who is across every port that came up or trained again?
                let mut ask: Vec<PortIdx> = self
                    .reads
                    .iter()
                    .filter(|(p, pi)| {
                        is_up(pi) && (f.port(**p).remote.is_none() || bounced(m, **p, pi))
                    })
                    .map(|(&p, _)| p)
                    .collect();
                ask.sort();
                for port in ask {
                    let Some(mut path) = self.route_to(m, port) else {
                        continue;
                    };
                    if !path.push(f.port(port).num) {
                        continue;
                    }
                    let key = dest::behind(f.node(f.port(port).node).guid, f.port(port).num);
                    self.queue.push_back(get(
                        Purpose::RepairNodeInfo { port },
                        attr::NODE_INFO,
                        0,
                        Target::Path(path),
                        key,
                    ));
                }
                if !self.queue.is_empty() {
                    return None;
                }
            }
            Step::Identify => {
                self.step = Step::Reread;
                // Switches that came back empty are read whole.
                for n in self.reset(plan) {
                    let Some(path) = self.paths.get(&n).cloned() else {
                        continue;
                    };
                    let key = dest::node(f.node(n).guid);
                    for q in f.node_ports(n).collect::<Vec<_>>() {
                        if !self.reads.contains_key(&q) {
                            self.read_port(m, q, Target::Path(path), key);
                        }
                    }
                }
                if !self.queue.is_empty() {
                    return None;
                }
            }
            Step::Reread => {}
        }
        Some(self.found(m, plan))
    }

    /// A switch that did not trap, across links found down (or trained again: it may be
    /// back already), may have gone dark (a reboot, a power loss): its other neighbours
    /// whose traps went to the SM through it could not tell us their side, and the others'
    /// may come late. Their ports facing it are read, along routes around it. One lost link
    /// on the switch's own way to the SM explains its silence (its trap died there); two,
    /// half of its switch links, or a silence nothing explains, make it a suspect.
    fn read_orphans(&mut self, m: &Discovered, plan: &Plan) {
        let f = &m.fabric;
        let sm_lid = usize::from(m.own_lid().0);
        // Per silent switch: links lost, and whether one is its way to the SM.
        let mut lost: HashMap<NodeIdx, (usize, bool)> = HashMap::new();
        for (&p, pi) in &self.reads {
            // Down, or trained again: it may be back already.
            let changed = !is_up(pi) || bounced(m, p, pi);
            if let (true, Some(r)) = (changed, f.port(p).remote) {
                let x = f.port(r).node;
                // One that trapped counts too if it cannot be reached (its traps left
                // it before its last links went).
                if m.is_switch(x) && (!self.trapped.contains(&x) || self.doomed.contains(&x)) {
                    let to_sm = plan
                        .lft(x)
                        .and_then(|l| l.get(sm_lid))
                        .is_some_and(|e| e == f.port(r).num);
                    let e = lost.entry(x).or_default();
                    e.0 += 1;
                    e.1 |= to_sm;
                }
            }
        }
        let switch_links = |x: NodeIdx| {
            f.node_ports(x)
                .filter(|&q| {
                    f.port(q).num != 0
                        && f.port(q)
                            .remote
                            .is_some_and(|r| m.is_switch(f.port(r).node))
                })
                .count()
        };
        let dark: BTreeSet<NodeIdx> = lost
            .into_iter()
            .filter(|&(x, (n, explained))| n >= 2 || 2 * n >= switch_links(x) || !explained)
            .map(|(x, _)| x)
            .collect();
        self.dark = dark.clone();
        let down: BTreeSet<PortIdx> = self
            .reads
            .iter()
            .filter(|(_, pi)| !is_up(pi))
            .map(|(&p, _)| p)
            .collect();
        let mut ask = Vec::new();
        for &x in &dark {
            for q in f.node_ports(x) {
                let Some(r) = f.port(q).remote else { continue };
                let y = f.port(r).node;
                // Every port facing it not read yet: a neighbour's trap may have gone
                // through it, or be late, and one that trapped may have been read only
                // up to another change. A port read costs one SMP; a switch thought
                // still linked when it is gone costs a whole re-routing.
                let silenced = m.is_switch(y) && !self.reads.contains_key(&r);
                if silenced {
                    ask.push((y, r));
                }
            }
        }
        let to: Vec<NodeIdx> = ask.iter().map(|&(y, _)| y).collect();
        let paths = m.paths_avoiding(&to, &dark, |p| down.contains(&p));
        for ((y, r), path) in ask.into_iter().zip(paths) {
            if let Some(path) = path {
                self.read_port(m, r, Target::Path(path), dest::node(f.node(y).guid));
            }
        }
    }

    /// Switches across a port that came up whose LinearFDBTop is not the plan's: they
    /// came back empty (rebooted).
    fn reset(&self, plan: &Plan) -> Vec<NodeIdx> {
        self.switch_infos
            .iter()
            .filter(|(_, si)| si.linear_fdb_top != plan.max_lid)
            .map(|(&n, _)| n)
            .collect()
    }

    fn found(&self, m: &Discovered, plan: &Plan) -> Found {
        let f = &m.fabric;
        let mut changes = Vec::new();
        let mut ports = Vec::new();
        let mut seen = BTreeSet::new();
        let mut reads: Vec<(&PortIdx, &port_info::Repr)> = self.reads.iter().collect();
        reads.sort_by_key(|(p, _)| **p);
        for (&p, pi) in reads {
            let port = f.port(p);
            let remote = port.remote;
            if let Some(r) = remote {
                if !is_up(pi) {
                    if seen.insert(p.min(r)) {
                        changes.push(LinkChange::Down(p, r));
                    }
                    continue;
                }
                if !bounced(m, p, pi) {
                    continue;
                }
            } else if !is_up(pi) || port.num == 0 {
                continue;
            }
            // Up, or trained again: who is across?
            let Some(&(guid, num)) = self.across.get(&p) else {
                // A host port read through its own route: nothing across to ask.
                continue;
            };
            let Some(q) = f.node_by_guid(guid).and_then(|n| f.port_of(n, num)) else {
                return Found::Heavy(format!(
                    "a node not in the model ({guid}) is behind {}[{}]",
                    f.node(port.node).guid,
                    port.num
                ));
            };
            match (remote, f.port(q).remote) {
                (None, None) => {
                    if seen.insert(p.min(q)) {
                        changes.push(LinkChange::Up(p, q));
                    }
                }
                (Some(r), _) if r == q => {}
                _ => {
                    return Found::Heavy(format!(
                        "{}[{}] is cabled to {guid}[{num}], which the model has elsewhere",
                        f.node(port.node).guid,
                        port.num
                    ));
                }
            }
            ports.push(p);
            ports.push(q);
        }
        let reset = self.reset(plan);
        for &n in &reset {
            // Its neighbours' ends trained again with it, whether or not their traps
            // reached us (one whose route to the SM crossed it could not): both ends of
            // a link must be ARMED before either goes ACTIVE.
            for q in f.node_ports(n) {
                ports.push(q);
                ports.extend(f.port(q).remote);
            }
        }
        ports.sort();
        ports.dedup();
        if changes.is_empty() && ports.is_empty() {
            Found::Nothing
        } else {
            Found::Changes {
                changes,
                ports,
                reset,
            }
        }
    }

    /// The PortInfo read of a port, to take into the model.
    pub(super) fn reads(&self) -> impl Iterator<Item = (PortIdx, &port_info::Repr)> + '_ {
        self.reads.iter().map(|(&p, pi)| (p, pi))
    }

    /// The SwitchInfo read of a switch across a port that came up.
    pub(super) fn switch_info(&self, n: NodeIdx) -> Option<&switch_info::Repr> {
        self.switch_infos.get(&n)
    }
}

/// A linked port that trained again since the model saw it ACTIVE (its neighbour rebooted,
/// or the cable was pulled and put back between two looks).
/// The port is not as the model holds it: its link came or went, or trained again.
fn differs(m: &Discovered, p: PortIdx, now: &port_info::Repr) -> bool {
    is_up(now) != m.fabric.port(p).remote.is_some() || (is_up(now) && bounced(m, p, now))
}

fn bounced(m: &Discovered, p: PortIdx, now: &port_info::Repr) -> bool {
    use sm_mad::port_info::PortState;
    let was = m.port_info(p).map(|pi| pi.port_state);
    was == Some(PortState::Active) && now.port_state == PortState::Init
}

/// The exits from switch `from` to switch `to` through present switches other than
/// `avoid`, at most [`PROBE_DETOUR`] links (none when they are the same switch). The
/// search gives up after [`DETOUR_NODES`] switches: a pair that far apart is read.
fn detour(m: &Discovered, from: NodeIdx, to: NodeIdx, avoid: NodeIdx) -> Option<Vec<u8>> {
    let f = &m.fabric;
    let mut via: HashMap<NodeIdx, (NodeIdx, u8)> = HashMap::new();
    let mut frontier = vec![from];
    let mut found = from == to;
    for _ in 0..PROBE_DETOUR {
        if found {
            break;
        }
        let mut next = Vec::new();
        'grow: for &n in &frontier {
            for p in f.node_ports(n) {
                let Some(r) = f.port(p).remote else { continue };
                let t = f.port(r).node;
                if t == avoid || t == from || !m.is_switch(t) || !m.present(t) {
                    continue;
                }
                if let std::collections::hash_map::Entry::Vacant(e) = via.entry(t) {
                    e.insert((n, f.port(p).num));
                    if t == to {
                        found = true;
                        break 'grow;
                    }
                    if via.len() > DETOUR_NODES {
                        return None;
                    }
                    next.push(t);
                }
            }
        }
        frontier = next;
    }
    if !found {
        return None;
    }
    let mut hops = Vec::new();
    let mut at = to;
    while at != from {
        let &(up, exit) = via.get(&at)?;
        hops.push(exit);
        at = up;
    }
    hops.reverse();
    Some(hops)
}
