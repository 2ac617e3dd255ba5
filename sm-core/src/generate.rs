//! Topology generators: fat-trees (2-level, 3-level, k-ary n-tree), torus and mesh,
//! dragonfly and dragonfly+, and seeded random irregular graphs, each returned as a
//! [`Fabric`].
//!
//! [`generate`] takes a [`GenSpec`] (serde-friendly, one variant per family), checks every
//! parameter (a refusal names the parameter and says why) and builds the fabric. The same
//! spec always gives the same fabric: same node order, GUIDs, descriptions and port numbers,
//! so the text written by [`crate::topo::write_ibnetdiscover`] is byte-identical.
//!
//! # Conventions shared by every family
//!
//! - **Node order**: all CAs first (host 0, 1, ...), then the switches tier by tier. ibsim
//!   attaches a client without `SIM_HOST` to the first node of the file, so an SM started
//!   against a generated file runs on host 0.
//! - **GUIDs** (unique and stable for given parameters, never colliding between kinds):
//!   - switch: `0x0002_RRRR_IIII_IIII` = [`SWITCH_GUID_BASE`] `| role << 32 | index`, where
//!     the role is the tier (1 = leaf / edge, 2 = spine / aggregation, 3 = core, `t` for tier
//!     `t` of a k-ary n-tree; 1 for torus, mesh, dragonfly routers and random switches) and
//!     the index counts switches of that role across the whole fabric;
//!   - CA: `0x0001_0000_HHHH_HH00` = [`CA_GUID_BASE`] `| host << 8`; port `p` has GUID
//!     node GUID + `p` (what ibsim does), which the low byte leaves room for.
//!
//!   The system image GUID is the node GUID; vendor and device ids are 0.
//! - **Descriptions** say what and where: `leaf 3`, `spine 0`, `leaf 5 pod 2`, `core 17`,
//!   `tier 2 switch 9`, `switch 1,2,0` (torus coordinates), `switch 2 group 4`,
//!   `switch 12` (random); a host adds its number to its switch's description:
//!   `host 17 leaf 3`.
//! - **Ports**: a switch's host ports come first (1, 2, ...), then its links in the order
//!   the family description gives. Every CA has `ca_ports` ports (default 1), all cabled
//!   to consecutive host ports of the same switch (a host therefore takes `ca_ports` of the
//!   switch's ports). Unused switch ports stay unlinked.
//! - **Size limits**: a switch or CA has at most 254 ports; a fabric at most [`MAX_NODES`]
//!   nodes and [`MAX_PORT_SLOTS`] port slots (checked before anything is allocated). A
//!   subnet addresses at most 49,151 unicast LIDs (switches + CA ports); [`IbsimLimits`]
//!   reports what a fabric needs.
//!
//! # Families
//!
//! - [`FatTree2`] (leaf / spine): the full construction for radix `r` has `r` leaves with
//!   `r/2` hosts and `r/2` uplinks each and `r/2` spines, one link from every leaf to every
//!   spine: `r²/2` hosts (radix 36: 648 hosts, 36 leaves, 18 spines). Hosts per leaf (or an
//!   oversubscription ratio such as `2:1`), uplinks, leaves and spines may be chosen; leaf
//!   uplinks go round-robin over the spines (uplink `j` of leaf `l` to spine
//!   `(l·u + j) mod S`), so fewer spines get evenly spread parallel links and every spine
//!   carries the same number of links, give or take one.
//! - [`FatTree3`]: the real-world 3-level tree of radix `r` (`k = r/2`): `r` pods of `k`
//!   leaves (`k` hosts each) and `k` aggregation switches ("spines"), leaves and spines of a
//!   pod fully connected; `k²` core switches use all `r` ports downwards, one link per pod:
//!   spine `j` of every pod links to cores `j·k .. j·k+k-1`. That is `r³/4` hosts and
//!   `5r²/4` switches (radix 36: 11,664 hosts, 1,620 switches; radix 48: 27,648 hosts,
//!   2,880 switches). Fewer pods prune the tree and keep all `k²` cores: radix 36 with 8
//!   pods gives 2,592 hosts and 612 switches (8 × 36 pod switches + 324 cores), the fabric
//!   called "2-level fat-tree of 36-port switches: 2592 CAs / 612 switches" in the project
//!   notes; no 2-level leaf/spine tree of 36-port switches gives those figures.
//! - [`KaryNTree`]: the k-ary n-tree of Petrini and Vanneschi with `k = radix/2`: `kⁿ`
//!   hosts, `n·kⁿ⁻¹` switches in `n` tiers; the top tier uses only its `k` down ports
//!   (radix 36, 3 levels: 5,832 hosts, 972 switches). A switch's index is a string of `n-1`
//!   base-`k` digits; between tiers `t` and `t+1`, switches are linked exactly when their
//!   indices differ at most in digit `t-1`. Down ports come first (1..=k), up ports after.
//! - [`Grid`] as [`GenSpec::Torus`] or [`GenSpec::Mesh`]: any number of dimensions, hosts
//!   per switch, parallel links per dimension. Per dimension a switch has `2·parallel` ports
//!   (`+` then `-`); a dimension of size 2 has one neighbour, so it gets `parallel` ports and
//!   one set of links between the two switches (not a doubled ring); size 1 gets no ports.
//!   The torus wraps around, the mesh does not. Switch index = first coordinate fastest.
//! - [`Dragonfly`]: groups of routers, all-to-all inside a group (router `s` reaches router
//!   `s'` on its `(s' < s ? s' : s'-1)`-th local port), `global` ports per router. Global links use
//!   the *consecutive* (a.k.a. absolute) arrangement: a group's `a·h` global ports are
//!   numbered router by router; port `j` of group `i` leads to the `(j mod (g-1))`-th other
//!   group in ascending order, in round `j div (g-1)`. With `g = a·h + 1` every pair of groups
//!   has exactly one link; with fewer groups each full round adds one link per pair, and a
//!   last partial round links the lowest-numbered groups among themselves, leaving the
//!   other ports of that round unused.
//! - [`DragonflyPlus`]: each group is a 2-level leaf/spine tree (every leaf linked once to
//!   every spine of its group); only spines carry global links, arranged as above.
//! - [`Random`]: a seeded random switch graph (SplitMix64, implemented here, so a seed means
//!   the same graph on every platform and release): a random spanning tree first (connected
//!   by construction), then random links between switches with free ports, avoiding
//!   parallel links where it can; when the free ports are left on one switch, an existing
//!   link `u–v` is replaced by `u–w–v`. No port is ever used twice.
//!
//! # Loading a generated fabric into ibsim
//!
//! The output of [`crate::topo::write_ibnetdiscover`] is an ibsim net file:
//! `ibsm gen ... -o fabric.net; ibsim -s fabric.net`. ibsim's defaults hold 2,048 nodes, 256
//! switches, 13,312 ports and LIDs below 30,720; beyond that it aborts while parsing ("no
//! more switches"), so start it with the limits [`IbsimLimits::flags`] prints (`ibsm gen`
//! prints them on stderr): `-N` all nodes, `-S` switches, `-P` the sum of switch ports
//! (+1 each for port 0) and CA ports, and `-L 49152` once the fabric needs 30,720 LIDs or
//! more. These are exact: one less and ibsim refuses the file. Example: the radix-48
//! 3-level tree (30,528 LIDs) loads with `ibsim -s fabric.net -N 30528 -S 2880 -P 168768`.
//! Run ibsim and its clients in one network namespace (`unshare -n`), and wrap every
//! diagnostic tool in `timeout`: under the shim an unanswered query waits forever.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use sm_mad::Guid;

use crate::fabric::{Fabric, FabricError, NodeIdx, NodeKind, NodeSpec, PortIdx};

/// Base of switch node GUIDs (role in bits 32..48, index in bits 0..32).
pub const SWITCH_GUID_BASE: u64 = 0x0002_0000_0000_0000;
/// Base of CA node GUIDs (host number from bit 8; port GUIDs add the port number).
pub const CA_GUID_BASE: u64 = 0x0001_0000_0000_0000;
/// Most ports a switch or CA can have (NumPorts is a byte; 255 is reserved).
pub const MAX_NODE_PORTS: u32 = 254;
/// Most nodes a generated fabric may have.
pub const MAX_NODES: u64 = 1 << 20;
/// Most port slots (switch ports + 1, CA ports) a generated fabric may have.
pub const MAX_PORT_SLOTS: u64 = 1 << 23;
/// Highest unicast LID: a subnet cannot address more end ports than this.
pub const MAX_UNICAST_LIDS: u64 = 0xBFFF;

/// Which fabric to generate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "family", rename_all = "kebab-case")]
pub enum GenSpec {
    /// 2-level leaf/spine fat-tree.
    FatTree2(FatTree2),
    /// 3-level pod/core fat-tree (top switches use all ports downwards).
    FatTree3(FatTree3),
    /// k-ary n-tree (`k = radix/2`, `n` levels).
    KaryNTree(KaryNTree),
    /// Torus: a grid with wraparound links.
    Torus(Grid),
    /// Mesh: a grid without wraparound.
    Mesh(Grid),
    /// Dragonfly: all-to-all groups joined by global links.
    Dragonfly(Dragonfly),
    /// Dragonfly+: leaf/spine groups, spines joined by global links.
    DragonflyPlus(DragonflyPlus),
    /// Seeded random irregular switch graph.
    Random(Random),
}

fn one() -> u32 {
    1
}

fn is_one(v: &u32) -> bool {
    *v == 1
}

/// A 2-level leaf/spine fat-tree. Unset options take the full non-blocking construction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FatTree2 {
    /// Ports per switch.
    pub radix: u32,
    /// Hosts per leaf (default: half the radix, divided by `ca_ports`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hosts_per_leaf: Option<u32>,
    /// Host ports : uplinks per leaf, instead of `hosts_per_leaf` (must divide the radix).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oversubscription: Option<Ratio>,
    /// Uplinks per leaf (default: every port not used by hosts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uplinks: Option<u32>,
    /// Number of leaves (default: as many as the spines' ports take).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leaves: Option<u32>,
    /// Number of spines (default: one per leaf uplink; at most the uplinks per leaf).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spines: Option<u32>,
    /// Ports per CA.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub ca_ports: u32,
}

impl FatTree2 {
    /// The full non-blocking tree of this radix.
    pub fn new(radix: u32) -> Self {
        FatTree2 {
            radix,
            hosts_per_leaf: None,
            oversubscription: None,
            uplinks: None,
            leaves: None,
            spines: None,
            ca_ports: 1,
        }
    }
}

/// A 3-level fat-tree of pods under a core tier.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FatTree3 {
    /// Ports per switch (even).
    pub radix: u32,
    /// Number of pods (default: the radix, i.e. the full tree).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<u32>,
    /// Hosts per leaf (default and maximum: half the radix, divided by `ca_ports`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hosts_per_leaf: Option<u32>,
    /// Ports per CA.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub ca_ports: u32,
}

impl FatTree3 {
    /// The full tree of this radix.
    pub fn new(radix: u32) -> Self {
        FatTree3 {
            radix,
            pods: None,
            hosts_per_leaf: None,
            ca_ports: 1,
        }
    }
}

/// A k-ary n-tree with `k = radix / 2`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KaryNTree {
    /// Ports per switch (even): `2k`.
    pub radix: u32,
    /// Number of switch tiers `n`.
    pub levels: u32,
    /// Ports per CA (each leaf has `k` hosts, so `k·ca_ports + k` must fit the radix).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub ca_ports: u32,
}

/// A torus or mesh.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grid {
    /// Size of each dimension (switches along it).
    pub dims: Vec<u32>,
    /// Hosts per switch.
    pub hosts_per_switch: u32,
    /// Parallel links per dimension: empty means 1, one value applies to every dimension.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parallel: Vec<u32>,
    /// Ports per switch (default: exactly what hosts and links need).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub radix: Option<u32>,
    /// Ports per CA.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub ca_ports: u32,
}

impl Grid {
    /// A grid with single links and default radix.
    pub fn new(dims: Vec<u32>, hosts_per_switch: u32) -> Self {
        Grid {
            dims,
            hosts_per_switch,
            parallel: Vec::new(),
            radix: None,
            ca_ports: 1,
        }
    }
}

/// A dragonfly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dragonfly {
    /// Number of groups `g`.
    pub groups: u32,
    /// Routers (switches) per group `a`.
    pub switches_per_group: u32,
    /// Hosts per router `p`.
    pub hosts_per_switch: u32,
    /// Global links per router `h` (`a·h ≥ g-1`).
    pub global_per_switch: u32,
    /// Ports per switch (default: `p·ca_ports + a-1 + h`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub radix: Option<u32>,
    /// Ports per CA.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub ca_ports: u32,
}

impl Dragonfly {
    /// `groups` groups of `switches` routers with `hosts` hosts each, and the fewest global
    /// links per router that join every pair of groups.
    pub fn new(groups: u32, switches: u32, hosts: u32) -> Dragonfly {
        Dragonfly {
            groups,
            switches_per_group: switches,
            hosts_per_switch: hosts,
            global_per_switch: groups.saturating_sub(1).div_ceil(switches.max(1)).max(1),
            radix: None,
            ca_ports: 1,
        }
    }
}

/// A dragonfly+ (leaf/spine groups; spines carry the global links).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DragonflyPlus {
    /// Number of groups `g`.
    pub groups: u32,
    /// Leaves per group.
    pub leaves_per_group: u32,
    /// Spines per group.
    pub spines_per_group: u32,
    /// Hosts per leaf.
    pub hosts_per_leaf: u32,
    /// Global links per spine `h` (`spines·h ≥ g-1`).
    pub global_per_spine: u32,
    /// Ports per switch (default: what the busier of leaf and spine needs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub radix: Option<u32>,
    /// Ports per CA.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub ca_ports: u32,
}

/// A seeded random irregular switch graph.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Random {
    /// Number of switches.
    pub switches: u32,
    /// Ports per switch.
    pub radix: u32,
    /// Hosts per switch.
    pub hosts_per_switch: u32,
    /// Switch-to-switch links (default: as many as the free ports allow).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub links: Option<u64>,
    /// Seed of the generator.
    pub seed: u64,
    /// Ports per CA.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub ca_ports: u32,
}

/// A ratio of host ports to uplinks, written `down:up` (e.g. `2:1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Ratio {
    pub down: u32,
    pub up: u32,
}

impl fmt::Display for Ratio {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.down, self.up)
    }
}

impl FromStr for Ratio {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || format!("\"{s}\" is not a ratio such as 2:1");
        let (a, b) = s.split_once(':').ok_or_else(bad)?;
        let down = a.trim().parse().map_err(|_| bad())?;
        let up = b.trim().parse().map_err(|_| bad())?;
        if down == 0 || up == 0 {
            return Err(format!(
                "\"{s}\": both sides of the ratio must be at least 1"
            ));
        }
        Ok(Ratio { down, up })
    }
}

impl TryFrom<String> for Ratio {
    type Error = String;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<Ratio> for String {
    fn from(r: Ratio) -> String {
        r.to_string()
    }
}

/// Why a fabric could not be generated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GenError {
    /// A parameter is out of range or contradicts another.
    #[error("{param} = {value}: {reason}")]
    Param {
        param: &'static str,
        value: String,
        reason: String,
    },
    /// The fabric would exceed [`MAX_NODES`] or [`MAX_PORT_SLOTS`].
    #[error(
        "the fabric would have {nodes} nodes and {ports} port slots; the generator's limits are {MAX_NODES} nodes and {MAX_PORT_SLOTS} port slots"
    )]
    TooLarge { nodes: u64, ports: u64 },
    /// The random graph could not take the requested number of links.
    #[error(
        "links = {requested}: only {placed} links fit without using a port twice or cabling a switch to itself"
    )]
    Links { requested: u64, placed: u64 },
    /// The fabric model refused a node or link (a generator bug).
    #[error("building the fabric failed: {0}")]
    Fabric(#[from] FabricError),
}

fn param(param: &'static str, value: impl fmt::Display, reason: impl Into<String>) -> GenError {
    GenError::Param {
        param,
        value: value.to_string(),
        reason: reason.into(),
    }
}

/// Generates the fabric a spec describes.
pub fn generate(spec: &GenSpec) -> Result<Fabric, GenError> {
    let plan = match spec {
        GenSpec::FatTree2(s) => fat_tree2(s)?,
        GenSpec::FatTree3(s) => fat_tree3(s)?,
        GenSpec::KaryNTree(s) => kary_ntree(s)?,
        GenSpec::Torus(s) => grid(s, true)?,
        GenSpec::Mesh(s) => grid(s, false)?,
        GenSpec::Dragonfly(s) => dragonfly(s)?,
        GenSpec::DragonflyPlus(s) => dragonfly_plus(s)?,
        GenSpec::Random(s) => random(s)?,
    };
    plan.build()
}

impl GenSpec {
    /// The family's name as the serde tag spells it.
    pub fn family(&self) -> &'static str {
        match self {
            GenSpec::FatTree2(_) => "fat-tree2",
            GenSpec::FatTree3(_) => "fat-tree3",
            GenSpec::KaryNTree(_) => "kary-n-tree",
            GenSpec::Torus(_) => "torus",
            GenSpec::Mesh(_) => "mesh",
            GenSpec::Dragonfly(_) => "dragonfly",
            GenSpec::DragonflyPlus(_) => "dragonfly-plus",
            GenSpec::Random(_) => "random",
        }
    }
}

/// What ibsim must be told to hold a fabric (`ibsim -N -S -P [-L]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct IbsimLimits {
    /// `-N`: all nodes.
    pub nodes: usize,
    /// `-S`: switches.
    pub switches: usize,
    /// `-P`: switch ports + 1 each (port 0), plus CA and router ports.
    pub ports: usize,
    /// LIDs the fabric needs with LMC 0 (switches + CA and router ports).
    pub lids: usize,
}

impl IbsimLimits {
    /// ibsim's default linear forwarding table capacity (`-L`).
    pub const DEFAULT_LINEAR_CAP: usize = 30720;
    /// The `-L` value that covers the whole unicast LID range.
    pub const FULL_LINEAR_CAP: usize = 49152;

    /// The limits a fabric needs.
    pub fn of(f: &Fabric) -> IbsimLimits {
        let mut l = IbsimLimits {
            nodes: f.nodes().len(),
            switches: 0,
            ports: 0,
            lids: 0,
        };
        for n in f.nodes() {
            let ports = n.num_ports as usize;
            if n.kind == NodeKind::Switch {
                l.switches += 1;
                l.ports += ports + 1;
                l.lids += 1;
            } else {
                l.ports += ports;
                l.lids += ports;
            }
        }
        l
    }

    /// The linear FDB capacity needed (LIDs 1..=lids must index the table).
    pub fn linear_cap(&self) -> Option<usize> {
        (self.lids >= Self::DEFAULT_LINEAR_CAP).then_some(Self::FULL_LINEAR_CAP)
    }

    /// The LIDs are more than a subnet can address.
    pub fn exceeds_lid_space(&self) -> bool {
        self.lids as u64 > MAX_UNICAST_LIDS
    }

    /// The ibsim command-line flags: `-N n -S s -P p`, plus `-L 49152` when needed.
    pub fn flags(&self) -> String {
        let mut s = format!("-N {} -S {} -P {}", self.nodes, self.switches, self.ports);
        if let Some(l) = self.linear_cap() {
            s.push_str(&format!(" -L {l}"));
        }
        s
    }
}

// ---------------------------------------------------------------------------------------
// The plan: switches, hosts and links as plain numbers, turned into a Fabric at the end.

struct SwPlan {
    role: u32,
    index: u32,
    desc: String,
    ports: u32,
    /// Next free port for links placed with [`Plan::link_next`].
    next: u32,
}

struct Plan {
    ca_ports: u32,
    switches: Vec<SwPlan>,
    /// (switch, first host port on it)
    hosts: Vec<(u32, u32)>,
    links: Vec<(u32, u32, u32, u32)>,
}

impl Plan {
    fn new(ca_ports: u32) -> Plan {
        Plan {
            ca_ports,
            switches: Vec::new(),
            hosts: Vec::new(),
            links: Vec::new(),
        }
    }

    /// Adds a switch; its link ports start after `hosts` hosts.
    fn switch(&mut self, role: u32, index: u32, desc: String, ports: u32, hosts: u32) -> u32 {
        let i = self.switches.len() as u32;
        for h in 0..hosts {
            self.hosts.push((i, 1 + h * self.ca_ports));
        }
        self.switches.push(SwPlan {
            role,
            index,
            desc,
            ports,
            next: 1 + hosts * self.ca_ports,
        });
        i
    }

    /// Links `a` port `pa` to `b` port `pb`.
    fn link(&mut self, a: u32, pa: u32, b: u32, pb: u32) {
        self.links.push((a, pa, b, pb));
    }

    /// Links the next free ports of `a` and `b`.
    fn link_next(&mut self, a: u32, b: u32) {
        let pa = self.take_port(a);
        let pb = self.take_port(b);
        self.links.push((a, pa, b, pb));
    }

    fn take_port(&mut self, s: u32) -> u32 {
        let sw = &mut self.switches[s as usize];
        let p = sw.next;
        sw.next += 1;
        p
    }

    fn build(self) -> Result<Fabric, GenError> {
        let mut f = Fabric::new();
        let ca_ports = port_count(self.ca_ports)?;
        let first_switch = self.hosts.len() as u32;
        for (h, &(s, _)) in self.hosts.iter().enumerate() {
            let guid = Guid(CA_GUID_BASE | (h as u64) << 8);
            let desc = format!("host {h} {}", self.switches[s as usize].desc);
            f.add_node(NodeSpec::new(NodeKind::Ca, guid, desc, ca_ports))?;
        }
        for sw in &self.switches {
            let guid = Guid(SWITCH_GUID_BASE | (sw.role as u64) << 32 | sw.index as u64);
            let ports = port_count(sw.ports)?;
            f.add_node(NodeSpec::new(
                NodeKind::Switch,
                guid,
                sw.desc.clone(),
                ports,
            ))?;
        }
        let sw = |s: u32| NodeIdx(first_switch + s);
        for (h, &(s, first)) in self.hosts.iter().enumerate() {
            for q in 0..self.ca_ports {
                let a = port(&f, NodeIdx(h as u32), 1 + q)?;
                let b = port(&f, sw(s), first + q)?;
                f.connect(a, b)?;
            }
        }
        for &(a, pa, b, pb) in &self.links {
            let x = port(&f, sw(a), pa)?;
            let y = port(&f, sw(b), pb)?;
            f.connect(x, y)?;
        }
        Ok(f)
    }
}

fn port_count(n: u32) -> Result<u8, GenError> {
    u8::try_from(n)
        .ok()
        .filter(|&p| p >= 1 && u32::from(p) <= MAX_NODE_PORTS)
        .ok_or_else(|| param("ports", n, "a node has 1 to 254 ports"))
}

fn port(f: &Fabric, n: NodeIdx, p: u32) -> Result<PortIdx, GenError> {
    u8::try_from(p)
        .ok()
        .and_then(|p| f.port_of(n, p))
        .ok_or_else(|| {
            GenError::Fabric(FabricError::NoSuchPort {
                node: f.node(n).guid,
                port: u8::try_from(p).unwrap_or(u8::MAX),
            })
        })
}

// ---------------------------------------------------------------------------------------
// Parameter checks.

fn check_radix(name: &'static str, r: u32) -> Result<(), GenError> {
    if r == 0 || r > MAX_NODE_PORTS {
        return Err(param(name, r, "a switch has 1 to 254 ports"));
    }
    Ok(())
}

fn check_ca_ports(c: u32) -> Result<(), GenError> {
    if c == 0 || c > MAX_NODE_PORTS {
        return Err(param("ca_ports", c, "a CA has 1 to 254 ports"));
    }
    Ok(())
}

fn at_least(name: &'static str, v: u32, min: u32) -> Result<(), GenError> {
    if v < min {
        return Err(param(name, v, format!("must be at least {min}")));
    }
    Ok(())
}

/// Refuses fabrics beyond the generator's limits before anything is allocated.
fn check_size(switches: u64, switch_ports: u64, hosts: u64, ca_ports: u64) -> Result<(), GenError> {
    let nodes = switches.saturating_add(hosts);
    let ports = switches
        .saturating_mul(switch_ports.saturating_add(1))
        .saturating_add(hosts.saturating_mul(ca_ports));
    if nodes > MAX_NODES || ports > MAX_PORT_SLOTS {
        return Err(GenError::TooLarge { nodes, ports });
    }
    Ok(())
}

/// `a · b` with overflow reported as a size error.
fn mul(a: u64, b: u64) -> u64 {
    a.saturating_mul(b)
}

// ---------------------------------------------------------------------------------------
// Fat-trees.

fn fat_tree2(s: &FatTree2) -> Result<Plan, GenError> {
    let r = s.radix;
    check_radix("radix", r)?;
    at_least("radix", r, 2)?;
    check_ca_ports(s.ca_ports)?;
    let ca = s.ca_ports;
    let (h, u) = match (s.hosts_per_leaf, s.oversubscription) {
        (Some(h), Some(_)) => {
            return Err(param(
                "hosts_per_leaf",
                h,
                "give hosts_per_leaf or oversubscription, not both",
            ));
        }
        (None, Some(ratio)) => {
            if let Some(u) = s.uplinks {
                return Err(param(
                    "uplinks",
                    u,
                    "give uplinks or oversubscription, not both",
                ));
            }
            let parts = ratio.down as u64 + ratio.up as u64;
            if r as u64 % parts != 0 {
                return Err(param(
                    "oversubscription",
                    ratio,
                    format!(
                        "{}+{} = {parts} does not divide the radix {r}",
                        ratio.down, ratio.up
                    ),
                ));
            }
            let unit = r / parts as u32;
            let host_ports = unit * ratio.down;
            if host_ports % ca != 0 {
                return Err(param(
                    "oversubscription",
                    ratio,
                    format!(
                        "{host_ports} host ports per leaf do not divide into CAs of {ca} ports"
                    ),
                ));
            }
            (host_ports / ca, unit * ratio.up)
        }
        (h, None) => {
            let h = h.unwrap_or((r / 2) / ca);
            at_least("hosts_per_leaf", h, 1)?;
            if mul(h as u64, ca as u64) >= r as u64 {
                return Err(param(
                    "hosts_per_leaf",
                    h,
                    format!(
                        "{h} hosts of {ca} port(s) leave none of the {r} leaf ports for uplinks"
                    ),
                ));
            }
            (h, s.uplinks.unwrap_or(r - h * ca))
        }
    };
    at_least("uplinks", u, 1)?;
    if h as u64 * ca as u64 + u as u64 > r as u64 {
        return Err(param(
            "uplinks",
            u,
            format!("{h} host ports + {u} uplinks exceed the radix {r}"),
        ));
    }
    let spines = s.spines.unwrap_or(u);
    at_least("spines", spines, 1)?;
    if spines > u {
        return Err(param(
            "spines",
            spines,
            format!(
                "more spines than the {u} uplinks of a leaf: some leaf would not reach every spine"
            ),
        ));
    }
    let spine_ports = spines as u64 * r as u64;
    let leaves = match s.leaves {
        Some(l) => l,
        None => u32::try_from(spine_ports / u as u64).unwrap_or(u32::MAX),
    };
    at_least("leaves", leaves, 1)?;
    if leaves as u64 * u as u64 > spine_ports {
        return Err(param(
            "leaves",
            leaves,
            format!(
                "{leaves} leaves × {u} uplinks = {} exceed {spines} spines × {r} ports = {spine_ports}",
                leaves as u64 * u as u64
            ),
        ));
    }
    check_size(
        leaves as u64 + spines as u64,
        r as u64,
        mul(leaves as u64, h as u64),
        ca as u64,
    )?;

    let mut plan = Plan::new(ca);
    for l in 0..leaves {
        plan.switch(1, l, format!("leaf {l}"), r, h);
    }
    for sp in 0..spines {
        plan.switch(2, sp, format!("spine {sp}"), r, 0);
    }
    // Uplink j of leaf l goes to spine (l·u + j) mod S.
    let mut next = 0u32;
    for l in 0..leaves {
        for _ in 0..u {
            plan.link_next(l, leaves + next);
            next = (next + 1) % spines;
        }
    }
    Ok(plan)
}

fn fat_tree3(s: &FatTree3) -> Result<Plan, GenError> {
    let r = s.radix;
    check_radix("radix", r)?;
    if r < 2 || r % 2 != 0 {
        return Err(param(
            "radix",
            r,
            "a 3-level fat-tree needs an even radix (half the ports down, half up)",
        ));
    }
    check_ca_ports(s.ca_ports)?;
    let ca = s.ca_ports;
    let k = r / 2;
    let pods = s.pods.unwrap_or(r);
    at_least("pods", pods, 1)?;
    if pods > r {
        return Err(param(
            "pods",
            pods,
            format!("a core switch has {r} ports, one per pod"),
        ));
    }
    let h = s.hosts_per_leaf.unwrap_or(k / ca);
    at_least("hosts_per_leaf", h, 1)?;
    if h as u64 * ca as u64 > k as u64 {
        return Err(param(
            "hosts_per_leaf",
            h,
            format!("{h} hosts of {ca} port(s) exceed the {k} down ports of a leaf"),
        ));
    }
    let leaves = pods as u64 * k as u64;
    check_size(
        2 * leaves + k as u64 * k as u64,
        r as u64,
        leaves * h as u64,
        ca as u64,
    )?;

    let mut plan = Plan::new(ca);
    let host_ports = h * ca;
    for p in 0..pods {
        for i in 0..k {
            plan.switch(1, p * k + i, format!("leaf {i} pod {p}"), r, h);
        }
    }
    let spine0 = pods * k;
    for p in 0..pods {
        for j in 0..k {
            plan.switch(2, p * k + j, format!("spine {j} pod {p}"), r, 0);
        }
    }
    let core0 = 2 * pods * k;
    for c in 0..k * k {
        plan.switch(3, c, format!("core {c}"), r, 0);
    }
    for p in 0..pods {
        for i in 0..k {
            for j in 0..k {
                // leaf i uplink j <-> spine j down port i
                plan.link(p * k + i, host_ports + 1 + j, spine0 + p * k + j, 1 + i);
            }
        }
        for j in 0..k {
            for i in 0..k {
                // spine j uplink i <-> core j·k + i port p
                plan.link(spine0 + p * k + j, k + 1 + i, core0 + j * k + i, 1 + p);
            }
        }
    }
    Ok(plan)
}

fn kary_ntree(s: &KaryNTree) -> Result<Plan, GenError> {
    let r = s.radix;
    check_radix("radix", r)?;
    if r < 2 || r % 2 != 0 {
        return Err(param(
            "radix",
            r,
            "a k-ary n-tree needs an even radix (k = radix/2 ports down, k up)",
        ));
    }
    check_ca_ports(s.ca_ports)?;
    let ca = s.ca_ports;
    let k = r / 2;
    let n = s.levels;
    at_least("levels", n, 1)?;
    if k as u64 * ca as u64 + k as u64 > r as u64 {
        return Err(param(
            "ca_ports",
            ca,
            format!("a leaf's {k} hosts of {ca} ports and {k} uplinks exceed the radix {r}"),
        ));
    }
    // k^(n-1) switches per tier, computed without overflow.
    let mut per_tier: u64 = 1;
    for _ in 1..n {
        per_tier = mul(per_tier, k as u64);
        if per_tier > MAX_NODES {
            break;
        }
    }
    check_size(
        mul(per_tier, n as u64),
        r as u64,
        mul(per_tier, k as u64),
        ca as u64,
    )?;
    let per_tier = per_tier as u32;

    let mut plan = Plan::new(ca);
    for t in 1..=n {
        for w in 0..per_tier {
            let (desc, hosts) = if t == 1 {
                (format!("leaf {w}"), k)
            } else {
                (format!("tier {t} switch {w}"), 0)
            };
            plan.switch(t, w, desc, r, hosts);
        }
    }
    let up_base = |t: u32| if t == 1 { k * ca } else { k };
    // Between tiers t and t+1: switches whose indices differ at most in digit t-1.
    let mut weight = 1u32; // k^(t-1)
    for t in 1..n {
        let lower0 = (t - 1) * per_tier;
        let upper0 = t * per_tier;
        for w in 0..per_tier {
            let digit = (w / weight) % k;
            let base = w - digit * weight;
            for v in 0..k {
                let up = base + v * weight;
                plan.link(lower0 + w, up_base(t) + 1 + v, upper0 + up, 1 + digit);
            }
        }
        weight = weight.saturating_mul(k);
    }
    Ok(plan)
}

// ---------------------------------------------------------------------------------------
// Torus and mesh.

fn grid(s: &Grid, wrap: bool) -> Result<Plan, GenError> {
    check_ca_ports(s.ca_ports)?;
    let ca = s.ca_ports;
    if s.dims.is_empty() {
        return Err(param("dims", "[]", "give at least one dimension"));
    }
    if s.dims.contains(&0) {
        return Err(param(
            "dims",
            format_dims(&s.dims),
            "every dimension has at least 1 switch",
        ));
    }
    let par: Vec<u32> = match s.parallel.len() {
        0 => vec![1; s.dims.len()],
        1 => vec![s.parallel[0]; s.dims.len()],
        n if n == s.dims.len() => s.parallel.clone(),
        n => {
            return Err(param(
                "parallel",
                format!("{:?}", s.parallel),
                format!(
                    "{n} values for {} dimensions (give one value or one per dimension)",
                    s.dims.len()
                ),
            ));
        }
    };
    for &p in &par {
        at_least("parallel", p, 1)?;
    }
    // Port layout: hosts, then per dimension `+` ports and `-` ports.
    let mut needed = s.hosts_per_switch as u64 * ca as u64;
    if needed > MAX_NODE_PORTS as u64 {
        return Err(param(
            "hosts_per_switch",
            s.hosts_per_switch,
            format!("{needed} host ports exceed the 254 ports of a switch"),
        ));
    }
    let mut dim_base = Vec::with_capacity(s.dims.len());
    for (&d, &p) in s.dims.iter().zip(&par) {
        dim_base.push(needed);
        needed += match d {
            1 => 0,
            2 => p as u64,
            _ => 2 * p as u64,
        };
    }
    let radix = match s.radix {
        Some(r) => {
            check_radix("radix", r)?;
            if (r as u64) < needed {
                return Err(param(
                    "radix",
                    r,
                    format!("a switch needs {needed} ports for its hosts and links"),
                ));
            }
            r
        }
        None => {
            if needed == 0 || needed > MAX_NODE_PORTS as u64 {
                return Err(param(
                    "dims",
                    format_dims(&s.dims),
                    format!(
                        "a switch would need {needed} ports for its hosts and links (1 to 254)"
                    ),
                ));
            }
            needed as u32
        }
    };
    let mut count: u64 = 1;
    for &d in &s.dims {
        count = mul(count, d as u64);
    }
    check_size(
        count,
        radix as u64,
        mul(count, s.hosts_per_switch as u64),
        ca as u64,
    )?;
    let count = count as u32;

    let mut plan = Plan::new(ca);
    let mut coords = vec![0u32; s.dims.len()];
    for i in 0..count {
        let mut rest = i;
        for (c, &d) in coords.iter_mut().zip(&s.dims) {
            *c = rest % d;
            rest /= d;
        }
        let name = coords
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(",");
        plan.switch(1, i, format!("switch {name}"), radix, s.hosts_per_switch);
    }
    let mut stride = 1u32;
    for (dim, (&d, &p)) in s.dims.iter().zip(&par).enumerate() {
        let base = dim_base[dim] as u32;
        for i in 0..count {
            let c = (i / stride) % d;
            match d {
                1 => {}
                2 => {
                    if c == 0 {
                        for j in 0..p {
                            plan.link(i, base + 1 + j, i + stride, base + 1 + j);
                        }
                    }
                }
                _ => {
                    let next = if c + 1 < d {
                        i + stride
                    } else if wrap {
                        i - c * stride
                    } else {
                        continue;
                    };
                    for j in 0..p {
                        plan.link(i, base + 1 + j, next, base + p + 1 + j);
                    }
                }
            }
        }
        stride = stride.saturating_mul(d);
    }
    Ok(plan)
}

fn format_dims(d: &[u32]) -> String {
    d.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join("x")
}

// ---------------------------------------------------------------------------------------
// Dragonflies.

/// Global links between `g` groups of `m` global ports each, consecutive arrangement:
/// (group, port, group, port) with 0-based global port numbers, each link once.
fn global_links(g: u32, m: u32) -> Vec<(u32, u32, u32, u32)> {
    let mut out = Vec::new();
    if g < 2 {
        return out;
    }
    let others = g - 1;
    for i in 0..g {
        for j in 0..m {
            let o = j % others;
            let round = j / others;
            let t = if o < i { o } else { o + 1 };
            if t < i {
                continue; // placed from the lower group
            }
            let back = round * others + i;
            if back < m {
                out.push((i, j, t, back));
            }
        }
    }
    out
}

fn check_groups(groups: u32, global_ports: u64, what: &str) -> Result<(), GenError> {
    at_least("groups", groups, 1)?;
    if global_ports < groups as u64 - 1 {
        return Err(param(
            "groups",
            groups,
            format!(
                "{what} give {global_ports} global ports per group; reaching the other {} groups takes at least that many",
                groups - 1
            ),
        ));
    }
    Ok(())
}

fn chosen_radix(radix: Option<u32>, needed: u64) -> Result<u32, GenError> {
    match radix {
        Some(r) => {
            check_radix("radix", r)?;
            if (r as u64) < needed {
                return Err(param("radix", r, format!("a switch needs {needed} ports")));
            }
            Ok(r)
        }
        None => {
            if needed == 0 || needed > MAX_NODE_PORTS as u64 {
                return Err(param(
                    "radix",
                    needed,
                    "the switches would need this many ports (1 to 254)",
                ));
            }
            Ok(needed as u32)
        }
    }
}

fn dragonfly(s: &Dragonfly) -> Result<Plan, GenError> {
    check_ca_ports(s.ca_ports)?;
    let ca = s.ca_ports;
    let (g, a, p, h) = (
        s.groups,
        s.switches_per_group,
        s.hosts_per_switch,
        s.global_per_switch,
    );
    at_least("switches_per_group", a, 1)?;
    check_groups(
        g,
        a as u64 * h as u64,
        "switches_per_group × global_per_switch",
    )?;
    let needed = p as u64 * ca as u64 + (a as u64 - 1) + h as u64;
    let radix = chosen_radix(s.radix, needed)?;
    let switches = g as u64 * a as u64;
    check_size(switches, radix as u64, mul(switches, p as u64), ca as u64)?;

    let mut plan = Plan::new(ca);
    for gi in 0..g {
        for si in 0..a {
            plan.switch(1, gi * a + si, format!("switch {si} group {gi}"), radix, p);
        }
    }
    let local0 = p * ca + 1;
    let global0 = local0 + (a - 1);
    for gi in 0..g {
        for x in 0..a {
            for y in x + 1..a {
                // x reaches y on local port y-1, y reaches x on local port x.
                plan.link(gi * a + x, local0 + y - 1, gi * a + y, local0 + x);
            }
        }
    }
    for (gi, j, gt, jt) in global_links(g, a * h) {
        plan.link(
            gi * a + j / h,
            global0 + j % h,
            gt * a + jt / h,
            global0 + jt % h,
        );
    }
    Ok(plan)
}

fn dragonfly_plus(s: &DragonflyPlus) -> Result<Plan, GenError> {
    check_ca_ports(s.ca_ports)?;
    let ca = s.ca_ports;
    let (g, nl, ns, p, h) = (
        s.groups,
        s.leaves_per_group,
        s.spines_per_group,
        s.hosts_per_leaf,
        s.global_per_spine,
    );
    at_least("leaves_per_group", nl, 1)?;
    at_least("spines_per_group", ns, 1)?;
    check_groups(
        g,
        ns as u64 * h as u64,
        "spines_per_group × global_per_spine",
    )?;
    let leaf_needs = p as u64 * ca as u64 + ns as u64;
    let spine_needs = nl as u64 + h as u64;
    let radix = chosen_radix(s.radix, leaf_needs.max(spine_needs))?;
    let switches = g as u64 * (nl as u64 + ns as u64);
    check_size(
        switches,
        radix as u64,
        mul(g as u64 * nl as u64, p as u64),
        ca as u64,
    )?;

    let mut plan = Plan::new(ca);
    for gi in 0..g {
        for li in 0..nl {
            plan.switch(1, gi * nl + li, format!("leaf {li} group {gi}"), radix, p);
        }
    }
    let spine0 = g * nl;
    for gi in 0..g {
        for si in 0..ns {
            plan.switch(2, gi * ns + si, format!("spine {si} group {gi}"), radix, 0);
        }
    }
    for gi in 0..g {
        for li in 0..nl {
            for si in 0..ns {
                plan.link(gi * nl + li, p * ca + 1 + si, spine0 + gi * ns + si, 1 + li);
            }
        }
    }
    let global0 = nl + 1;
    for (gi, j, gt, jt) in global_links(g, ns * h) {
        plan.link(
            spine0 + gi * ns + j / h,
            global0 + j % h,
            spine0 + gt * ns + jt / h,
            global0 + jt % h,
        );
    }
    Ok(plan)
}

// ---------------------------------------------------------------------------------------
// Degraded fabrics.

/// What [`remove_links`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Removed {
    /// Switch-to-switch links removed.
    pub removed: usize,
    /// Switch-to-switch links the fabric had.
    pub of: usize,
}

/// Removes `fraction` of the switch-to-switch links, chosen by `seed`, as failed cables
/// leave a fabric. A link whose removal would cut the switches apart is kept (and the next
/// candidate taken), so every switch still reaches every other.
pub fn remove_links(fabric: &mut Fabric, fraction: f64, seed: u64) -> Removed {
    let is_sw = |f: &Fabric, p: PortIdx| f.node(f.port(p).node).kind == NodeKind::Switch;
    let mut links: Vec<(PortIdx, PortIdx)> = fabric
        .links()
        .filter(|&(a, b)| is_sw(fabric, a) && is_sw(fabric, b))
        .collect();
    let of = links.len();
    let want = ((of as f64) * fraction.clamp(0.0, 1.0)).round() as usize;
    let mut rng = SplitMix64::new(seed);
    // A seeded Fisher-Yates shuffle: candidates in a random order.
    for i in (1..links.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        links.swap(i, j);
    }
    let mut removed = 0;
    for &(a, b) in &links {
        if removed == want {
            break;
        }
        fabric.disconnect(a);
        if switches_connected(fabric) {
            removed += 1;
        } else {
            // Put it back: the cable was a bridge.
            let _ = fabric.connect(a, b);
        }
    }
    Removed { removed, of }
}

fn switches_connected(fabric: &Fabric) -> bool {
    let switches: Vec<NodeIdx> = fabric.switches().collect();
    let Some(&first) = switches.first() else {
        return true;
    };
    let mut seen = vec![false; fabric.nodes().len()];
    seen[first.0 as usize] = true;
    let mut stack = vec![first];
    let mut count = 1;
    while let Some(n) = stack.pop() {
        for p in fabric.node_ports(n) {
            let Some((m, _)) = fabric.peer(p) else {
                continue;
            };
            if fabric.node(m).kind == NodeKind::Switch && !seen[m.0 as usize] {
                seen[m.0 as usize] = true;
                count += 1;
                stack.push(m);
            }
        }
    }
    count == switches.len()
}

// ---------------------------------------------------------------------------------------
// Random irregular graphs.

/// SplitMix64 (Steele, Lea, Flood): tiny, fast, and fully specified by its seed.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`), without modulo bias.
    pub fn below(&mut self, n: u64) -> u64 {
        if n <= 1 {
            return 0;
        }
        let zone = u64::MAX - u64::MAX % n;
        loop {
            let x = self.next_u64();
            if x < zone {
                return x % n;
            }
        }
    }
}

/// Removes `x` from `open` (a small unordered set of switches with free ports).
fn close(open: &mut Vec<u32>, pos: &mut [usize], x: u32) {
    let i = pos[x as usize];
    let last = *open.last().unwrap_or(&x);
    open.swap_remove(i);
    if last != x {
        pos[last as usize] = i;
    }
    pos[x as usize] = usize::MAX;
}

fn random(s: &Random) -> Result<Plan, GenError> {
    check_ca_ports(s.ca_ports)?;
    let ca = s.ca_ports;
    let (n, r, h) = (s.switches, s.radix, s.hosts_per_switch);
    check_radix("radix", r)?;
    at_least("switches", n, 1)?;
    let host_ports = h as u64 * ca as u64;
    if host_ports > r as u64 {
        return Err(param(
            "hosts_per_switch",
            h,
            format!("{host_ports} host ports exceed the radix {r}"),
        ));
    }
    let free = r - host_ports as u32;
    let min_links = n as u64 - 1;
    // One switch alone would need a cable to itself.
    let max_links = if n == 1 {
        0
    } else {
        n as u64 * free as u64 / 2
    };
    if n > 2 && free < 2 {
        return Err(param(
            "hosts_per_switch",
            h,
            format!(
                "leaves {free} free port(s) per switch; connecting {n} switches needs at least 2"
            ),
        ));
    }
    if n == 2 && free < 1 {
        return Err(param(
            "hosts_per_switch",
            h,
            "leaves no free port to link the two switches",
        ));
    }
    let links = s.links.unwrap_or(max_links);
    if links < min_links || links > max_links {
        return Err(param(
            "links",
            links,
            format!(
                "{n} switches with {free} free ports each take {min_links} (connected) to {max_links} links"
            ),
        ));
    }
    check_size(n as u64, r as u64, mul(n as u64, h as u64), ca as u64)?;

    let mut rng = SplitMix64::new(s.seed);
    let mut left = vec![free; n as usize];
    let mut edges: Vec<(u32, u32)> = Vec::with_capacity(links as usize);
    let mut adjacent = std::collections::HashSet::new();
    let key = |a: u32, b: u32| (a.min(b), a.max(b));

    // A random spanning tree: switches in random order, each linked to a random earlier one
    // that still has a free port (every switch arrives with at least 2, so one always does).
    let mut order: Vec<u32> = (0..n).collect();
    for i in (1..order.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        order.swap(i, j);
    }
    let mut open: Vec<u32> = Vec::new();
    let mut pos = vec![usize::MAX; n as usize];
    for (i, &x) in order.iter().enumerate() {
        if i > 0 {
            let y = open[rng.below(open.len() as u64) as usize];
            edges.push((y, x));
            adjacent.insert(key(x, y));
            left[x as usize] -= 1;
            left[y as usize] -= 1;
            if left[y as usize] == 0 {
                close(&mut open, &mut pos, y);
            }
        }
        if left[x as usize] > 0 {
            pos[x as usize] = open.len();
            open.push(x);
        }
    }

    // The remaining links between random switches with free ports.
    while (edges.len() as u64) < links {
        if open.len() >= 2 {
            let mut pick = (0, 0);
            for attempt in 0..64 {
                let a = rng.below(open.len() as u64) as usize;
                let mut b = rng.below(open.len() as u64 - 1) as usize;
                if b >= a {
                    b += 1;
                }
                pick = (open[a], open[b]);
                if attempt < 63 && adjacent.contains(&key(pick.0, pick.1)) {
                    continue;
                }
                break;
            }
            let (x, y) = pick;
            edges.push((x, y));
            adjacent.insert(key(x, y));
            for z in [x, y] {
                left[z as usize] -= 1;
                if left[z as usize] == 0 {
                    close(&mut open, &mut pos, z);
                }
            }
        } else {
            // Free ports only on one switch w: replace a link u–v by u–w and w–v.
            let w = match open.first() {
                Some(&w) if left[w as usize] >= 2 => w,
                _ => break,
            };
            let start = rng.below(edges.len() as u64) as usize;
            let found = (0..edges.len())
                .map(|i| (start + i) % edges.len())
                .find(|&i| edges[i].0 != w && edges[i].1 != w);
            let Some(i) = found else { break };
            let (u, v) = edges[i];
            edges[i] = (u, w);
            edges.push((w, v));
            adjacent.insert(key(u, w));
            adjacent.insert(key(w, v));
            left[w as usize] -= 2;
            if left[w as usize] == 0 {
                close(&mut open, &mut pos, w);
            }
        }
    }
    if (edges.len() as u64) < links {
        return Err(GenError::Links {
            requested: links,
            placed: edges.len() as u64,
        });
    }

    let mut plan = Plan::new(ca);
    for i in 0..n {
        plan.switch(1, i, format!("switch {i}"), r, h);
    }
    for (a, b) in edges {
        plan.link_next(a, b);
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_reference_values() {
        // First outputs for seed 1234567 as published with the algorithm.
        let mut r = SplitMix64::new(1234567);
        assert_eq!(r.next_u64(), 6457827717110365317);
        assert_eq!(r.next_u64(), 3203168211198807973);
        assert_eq!(r.next_u64(), 9817491932198370423);
    }

    #[test]
    fn below_stays_in_range() {
        let mut r = SplitMix64::new(7);
        for n in 1..50 {
            for _ in 0..20 {
                assert!(r.below(n) < n);
            }
        }
        assert_eq!(r.below(0), 0);
    }

    #[test]
    fn global_links_full_arrangement_pairs_every_group_once() {
        let (g, m) = (9, 8);
        let links = global_links(g, m);
        assert_eq!(links.len(), (g * (g - 1) / 2) as usize);
        let mut pairs: Vec<(u32, u32)> = links.iter().map(|l| (l.0, l.2)).collect();
        pairs.sort();
        pairs.dedup();
        assert_eq!(pairs.len(), links.len());
        // Every (group, port) used exactly once.
        let mut used = std::collections::HashSet::new();
        for &(a, pa, b, pb) in &links {
            assert!(used.insert((a, pa)) && used.insert((b, pb)));
        }
        assert_eq!(used.len(), (g * m) as usize);
    }

    #[test]
    fn global_links_partial_round() {
        // 5 groups, 6 ports: one full round (4 ports) and a partial one of 2.
        let links = global_links(5, 6);
        let mut used = std::collections::HashSet::new();
        for &(a, pa, b, pb) in &links {
            assert!(pa < 6 && pb < 6 && a < b);
            assert!(used.insert((a, pa)) && used.insert((b, pb)));
        }
        // Full round: 10 pairs; partial round links groups 0, 1, 2 among themselves.
        assert_eq!(links.len(), 10 + 3);
    }

    #[test]
    fn ratio_parses_and_refuses() {
        assert_eq!("2:1".parse::<Ratio>(), Ok(Ratio { down: 2, up: 1 }));
        assert!("2".parse::<Ratio>().is_err());
        assert!("0:1".parse::<Ratio>().is_err());
        assert!("a:b".parse::<Ratio>().is_err());
    }

    #[test]
    fn ibsim_flags() {
        let f = generate(&GenSpec::FatTree2(FatTree2::new(4))).unwrap();
        // 4 leaves, 2 spines, 8 hosts: 6 × 5 switch port slots + 8 CA ports.
        let l = IbsimLimits::of(&f);
        assert_eq!(l.flags(), "-N 14 -S 6 -P 38");
        assert_eq!(l.lids, 14);
        assert!(!l.exceeds_lid_space());
    }
}
