//! What one sweep did: the figures of the `info!` line, the `SweepDone` event and the JSON
//! report.

use super::requests::MadCounts;

/// Nanoseconds, as the report gives durations.
pub type Nanos = u64;

/// A node that left questions unanswered, after every retry and pass.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Unresponsive {
    /// Its GUID; for a node never reached, the port it is behind (`behind 0x...[3]`).
    pub node: String,
    /// Its NodeDescription, when known.
    pub description: String,
    /// What went unanswered.
    pub what: Vec<String>,
}

/// A GUID more than one device answers with (a cloned or mis-flashed HCA or switch). The SM
/// keeps the device it met first and leaves the other out, with whatever only it leads to.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DuplicateGuid {
    pub guid: String,
    /// `node` (a NodeGUID) or `port` (a PortGUID).
    pub kind: String,
    /// The device kept: the port it was first reached behind (or the SM's own node) and the
    /// directed route to it, as `smpquery -D` takes it.
    pub kept: String,
    /// Where another device answered with the GUID (a switch is met behind each of its
    /// links), left out of the subnet.
    pub left_out: Vec<String>,
    /// What gave it away.
    pub why: String,
}

impl std::fmt::Display for DuplicateGuid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "duplicate {} GUID {}: kept {}; another device answers with it {}, left out ({})",
            self.kind,
            self.guid,
            self.kept,
            self.left_out.join(" and "),
            self.why
        )
    }
}

/// What one sweep did, for the `info!` line and the JSON report.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct SweepReport {
    pub sweep: u64,
    /// A heavy sweep (every node read again), or a repair (`heavy: false`).
    pub heavy: bool,
    /// What started it: `start`, `trap 128 from GUID...` (a repair), `trap N`, `light
    /// sweep`, `retry`, `requested`.
    pub trigger: String,
    /// A repair: wall time from the first trap's arrival to the last Set answered
    /// (nanoseconds; 0 without a stopwatch).
    pub recovery_ns: Nanos,
    /// LFT entries whose port changed.
    pub lft_entries_moved: u64,
    /// LFT entries that had to change: their port no longer started a legal shortest path
    /// (it was on a link that went down, or the path behind it got longer or illegal).
    pub lft_entries_moved_min: u64,
    /// Entries of `lft_entries_moved` that went back to the port they had before an
    /// earlier repair (their link returned).
    pub lft_entries_restored: u64,
    /// (switch with CAs, switch LID) pairs that updn or ftree ranks leave without a legal
    /// path after the repair (management traffic to that switch; OpenSM leaves them too).
    pub unrouted_switch_pairs: u64,
    /// Layered repairs: (source switch, LID) paths given another SL (hosts that keep the
    /// SL they asked for still send on the old one).
    pub paths_new_sl: u64,
    /// Paths a layered repair changed whose traffic, on the SL its hosts hold, could close
    /// a credit loop while the repair is programmed or until they ask the SA again (the
    /// path fit its layer in no way that stays acyclic).
    pub paths_exposed: u64,
    /// How a repair computed its routes (whole, and why, or only what broke).
    pub reroute: String,
    /// A repair: the switches it looked at (those that trapped or told of a change, and
    /// those found rebooted or back), by GUID.
    pub looked_at: Vec<String>,
    pub subnet_up: bool,
    pub nodes: usize,
    pub switches: usize,
    pub cas: usize,
    pub routers: usize,
    pub links: usize,
    /// LIDs in use (every LID of every LMC range).
    pub lids: usize,
    pub engine: String,
    pub engine_used: String,
    pub fallbacks: Vec<String>,
    pub mads_sent: u64,
    /// The fewest SMPs this sweep could have sent: one NodeInfo per link plus one, one
    /// NodeDescription per node, one SwitchInfo per switch, one PortInfo per switch port and
    /// per linked CA port, then one
    /// Set per value that had to change (settings with ARMED, ACTIVE, SwitchInfo, LFT,
    /// table and MFT blocks). Retries and duplicate NodeInfos are what `mads_sent` has more.
    pub mads_min: u64,
    pub mads_retried: u64,
    pub mads_lost: u64,
    pub port_info_sets: u64,
    pub switch_info_sets: u64,
    pub lft_blocks_sent: u64,
    /// MFT blocks sent (this sweep, and joins and leaves since the previous one).
    pub mft_blocks_sent: u64,
    /// Multicast Sets (MFT blocks and MulticastFDBTop) of this sweep's programming.
    pub mcast_sets: u64,
    /// Discovery's share of `mads_min`.
    pub discovery_min: u64,
    pub pkey_blocks_sent: u64,
    pub qos_sets: u64,
    pub port_state_sets: u64,
    /// Of the PortInfo Sets with settings, those that also moved the port to ARMED.
    pub merged_armed: u64,
    pub discovery_ns: Nanos,
    pub programming_ns: Nanos,
    /// Routing computation only (wall clock when a stopwatch is given, else 0).
    pub routing_ns: Nanos,
    pub sweep_ns: Nanos,
    /// Errors met on the way. A sweep with errors is retried, except for duplicated GUIDs
    /// (listed here too): sweeping again cannot mend them.
    pub errors: Vec<String>,
    /// GUIDs more than one device answered with (heavy sweeps).
    pub duplicate_guids: Vec<DuplicateGuid>,
    /// Nodes that did not answer: the subnet is up without them, and later sweeps try
    /// them again.
    pub unresponsive: Vec<Unresponsive>,
    /// Ports taken out of the subnet because their link kept going down.
    pub unhealthy_ports: Vec<super::UnhealthyPort>,
    /// SMs found whose SMInfo did not carry our SM_Key (their GUIDs): never stood by for,
    /// handed the subnet or obeyed.
    pub untrusted_sms: Vec<String>,
    /// "master", or "standby" when the election left the subnet to another SM.
    pub sm_state: String,
    /// PortInfo Sets that asked a port's SA clients to register again (a new master's
    /// sweeps; part of `port_info_sets`).
    pub client_reregisters: u64,
}

/// What one light sweep did: its reads, and what it found.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct LightReport {
    /// Reads it asked: every switch's SwitchInfo, each known SM's SMInfo.
    pub reads: u64,
    /// Switches that reported a port change (SwitchInfo.PortStateChange).
    pub changed: u64,
    /// SMPs sent from its start to its end (retries, reads again by directed route, and
    /// multicast blocks sent again included).
    pub mads_sent: u64,
    pub mads_retried: u64,
    pub mads_lost: u64,
    /// `nothing new`, `repair`, `gave way to a repair`, or `heavy sweep (why)`.
    pub outcome: String,
}

impl SweepReport {
    /// The fewest SMPs of the sweep: discovery's minimum and one Set per value that had to
    /// change.
    pub(super) fn min_mads(&self) -> u64 {
        self.discovery_min
            + self.port_info_sets
            + self.switch_info_sets
            + self.lft_blocks_sent
            + self.pkey_blocks_sent
            + self.qos_sets
            + self.mcast_sets
    }

    /// Lists the duplicated GUIDs among the errors. Done once the sweep's outcome is
    /// decided: they fail a `--once` run, not the sweep (another cannot mend them).
    pub(super) fn list_duplicates(&mut self) {
        self.errors
            .extend(self.duplicate_guids.iter().map(ToString::to_string));
    }

    /// Takes the wire counters of the sweep (`now` minus `at_start`).
    pub(super) fn take_counts(&mut self, c: MadCounts) {
        self.mads_sent = c.sent;
        self.mads_retried = c.retried;
        self.mads_lost = c.lost;
        self.mads_min = self.min_mads();
    }
}
