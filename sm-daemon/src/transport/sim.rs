//! Drives the SM core against the in-process simulated fabric in virtual time, in one
//! thread: the core's transmits go into the fabric, the fabric's deliveries come back, and
//! time jumps to whichever deadline is next. More SMs can sit on other ports of the same
//! fabric ([`SimDriver::add_sm`]) to exercise the election, handover and failover.
//!
//! A whole failover test (docs/TESTING.md walks through it): a master and a standby on a
//! generated fat-tree, a scenario that drops 5 % of the MADs, the master killed, and the
//! data path checked end to end by the tracer afterwards.
//!
//! ```
//! use sm_core::generate::{FatTree2, GenSpec, generate};
//! use sm_core::lid::LidStore;
//! use sm_daemon::core::Params;
//! use sm_daemon::transport::sim::SimDriver;
//! use sm_mad::sm_info::SmState;
//! use sm_sim::scenario::Scenario;
//! use sm_sim::trace::AllPairsOptions;
//! use sm_sim::SimConfig;
//!
//! const S: u64 = 1_000_000_000;
//! let fabric = generate(&GenSpec::FatTree2(FatTree2::new(6))).unwrap();
//! let hosts: Vec<_> = fabric
//!     .cas()
//!     .flat_map(|n| fabric.node_ports(n))
//!     .filter(|&p| fabric.port(p).remote.is_some())
//!     .collect();
//! let params = |priority| Params {
//!     sm_priority: priority,
//!     poll_interval: std::time::Duration::from_secs(1),
//!     poll_retries: 3,
//!     ..Params::default()
//! };
//! // The SM under test stands by on the first host; the master runs on the last one.
//! let mut d = SimDriver::new(&fabric, hosts[0], params(1), LidStore::new(), SimConfig::default());
//! let master = d.add_sm(hosts[hosts.len() - 1], params(9), LidStore::new());
//! let faults = Scenario::parse("inline", "at 0 loss 0.05").unwrap();
//! d.sim.load_scenario(&faults).unwrap();
//! d.start_peer(master);
//! assert!(d.run_while(20 * S, |d| d.peers[master].sm.is_up()));
//! d.start();
//! assert!(d.run_while(20 * S, |d| d.sm.sm_state() == SmState::Standby));
//!
//! d.stop_peer(master);
//! assert!(d.run_while(30 * S, |d| d.sm.is_up()), "the standby took over");
//! let check = d.sim.check_all_pairs(&AllPairsOptions::default());
//! assert!(check.pairs > 0 && check.all_delivered());
//! ```

use sm_core::fabric::{Fabric, PortIdx};
use sm_core::lid::LidStore;
use sm_sim::{EndpointId, Sim, SimConfig, SmEvent};

use crate::core::{Event, Instant, Params, Sm};
use crate::transport::sa_client::SaClients;

/// Virtual time of the simulated fabric, in nanoseconds.
pub type Nanos = u64;

/// Another SM on the same fabric.
#[derive(Debug)]
pub struct PeerSm {
    pub sm: Sm,
    pub ep: EndpointId,
    pub port: PortIdx,
    /// A stopped SM gets no MADs and no time, as if its process had died.
    pub running: bool,
}

/// Reads a configuration file again (a scenario's `reload FILE`), as the daemon does on
/// SIGHUP: the parameters, or why the file was refused.
pub type Reloader = Box<dyn FnMut(&str) -> Result<Params, String>>;

/// A scenario's `reload`, and how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reload {
    pub at: Nanos,
    pub file: String,
    /// What applied at once (`Ok`), or why the file was refused.
    pub outcome: Result<Vec<&'static str>, String>,
}

/// The SM and its fabric.
pub struct SimDriver {
    pub sim: Sim,
    pub sm: Sm,
    pub ep: EndpointId,
    sm_port: PortIdx,
    /// False once a scenario stopped `sm` (`stop-sm` on its port).
    pub sm_running: bool,
    /// What SMs a scenario starts (`start-sm`) run with, their priority aside.
    template: Params,
    /// SMs on other ports, driven alongside `sm`.
    pub peers: Vec<PeerSm>,
    /// The performance manager beside `sm`, on its port, when asked for: it reads every
    /// port's counters on its interval while `sm` is master of an up subnet.
    pub perf: Option<crate::perf::PerfMgr>,
    /// The hosts' SA clients a scenario's `join`, `leave` and `service` lines speak through.
    pub sa_clients: SaClients,
    /// How a scenario's `reload FILE` is read; without one a reload is refused.
    pub reloader: Option<Reloader>,
    /// Every scenario reload so far.
    pub reloads: Vec<Reload>,
    now: Nanos,
}

impl std::fmt::Debug for SimDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimDriver")
            .field("sim", &self.sim)
            .field("sm", &self.sm)
            .field("peers", &self.peers)
            .field("now", &self.now)
            .finish_non_exhaustive()
    }
}

impl SimDriver {
    /// An SM attached at `sm_port` of a freshly powered simulated `fabric`.
    pub fn new(
        fabric: &Fabric,
        sm_port: PortIdx,
        params: Params,
        lids: LidStore,
        cfg: SimConfig,
    ) -> SimDriver {
        let mut sim = Sim::new(fabric, cfg);
        let ep = sim.attach(sm_port);
        let params = Params {
            own_guid: params.own_guid.or(Some(fabric.port(sm_port).guid)),
            ..params
        };
        SimDriver {
            sim,
            template: params.clone(),
            sm: Sm::new(params, lids),
            ep,
            sm_port,
            sm_running: true,
            peers: Vec::new(),
            perf: None,
            sa_clients: SaClients::default(),
            reloader: None,
            reloads: Vec::new(),
            now: 0,
        }
    }

    /// Attaches another SM at `port` (not started); returns its index in `peers`.
    pub fn add_sm(&mut self, port: PortIdx, params: Params, lids: LidStore) -> usize {
        let ep = self.sim.attach(port);
        let params = Params {
            own_guid: params.own_guid.or(Some(self.sim.port(port).guid)),
            ..params
        };
        self.peers.push(PeerSm {
            sm: Sm::new(params, lids),
            ep,
            port,
            running: true,
        });
        self.peers.len() - 1
    }

    /// Starts peer `i`: its port claims an SM (IsSM) and it sweeps.
    pub fn start_peer(&mut self, i: usize) {
        let now = self.now;
        if let Some(p) = self.peers.get_mut(i) {
            self.sim.set_is_sm(p.port, true);
            p.sm.start(Instant::from_nanos(now));
        }
    }

    /// Stops peer `i` for good: its port no longer claims an SM and it answers nothing.
    pub fn stop_peer(&mut self, i: usize) {
        if let Some(p) = self.peers.get_mut(i) {
            p.running = false;
            self.sim.set_is_sm(p.port, false);
        }
    }

    /// Virtual time now.
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// Moves MADs both ways and time to the next deadline. Returns false when nothing is
    /// left to do (no pending event and no core deadline).
    pub fn step(&mut self) -> bool {
        self.flush();
        let Some(next) = self.next_deadline() else {
            return false;
        };
        self.now = self.now.max(next);
        self.sim.advance(self.now);
        self.deliver_and_time();
        // What the cores queued goes out now, so `next_deadline` sees it.
        self.flush();
        true
    }

    /// Whether any running SM has the subnet up.
    pub fn any_up(&self) -> bool {
        (self.sm_running && self.sm.is_up()) || self.peers.iter().any(|p| p.running && p.sm.is_up())
    }

    /// What a scenario asks of the SMs and hosts: SMs started or stopped, reloads, SA
    /// client requests.
    fn scenario_sms(&mut self) {
        while let Some(e) = self.sim.poll_sm_event() {
            if self.sa_clients.take(&mut self.sim, self.now, &e) {
                continue;
            }
            match e {
                SmEvent::Start {
                    port,
                    priority,
                    sm_key,
                } => {
                    if port == self.sm_port || self.peers.iter().any(|p| p.port == port) {
                        tracing::warn!(?port, "start-sm: an SM already ran on that port");
                        continue;
                    }
                    let mut params = Params {
                        sm_priority: priority,
                        ..self.template.clone()
                    };
                    if let Some(k) = sm_key {
                        params.sm_key = k;
                        params.sa.sa_key = k;
                    }
                    let i = self.add_sm(port, params, LidStore::new());
                    self.start_peer(i);
                }
                SmEvent::Stop { port } if port == self.sm_port => {
                    self.sm_running = false;
                    self.sim.set_is_sm(port, false);
                }
                SmEvent::Stop { port } => {
                    if let Some(i) = self.peers.iter().position(|p| p.port == port) {
                        self.stop_peer(i);
                    }
                }
                SmEvent::Reload { file } => self.reload(&file),
                // Taken by the SA clients above.
                SmEvent::Join { .. } | SmEvent::Leave { .. } | SmEvent::Service { .. } => {}
            }
        }
        self.sa_clients.poll(&mut self.sim, self.now);
    }

    /// A scenario's `reload FILE`: the SM under test takes what applies while running.
    fn reload(&mut self, file: &str) {
        let params = match self.reloader.as_mut() {
            Some(r) => r(file),
            None => Err("no way to read a configuration was given".into()),
        };
        let outcome = match params {
            Ok(p) => {
                let r = self.sm.reconfigure(Instant::from_nanos(self.now), &p);
                for k in &r.needs_restart {
                    tracing::warn!("reload: {k} changed; it takes effect at the next start");
                }
                tracing::info!(file, applied = ?r.applied, "configuration read again");
                Ok(r.applied)
            }
            Err(e) => {
                tracing::error!("reload {file}: {e}; the running configuration stays");
                Err(e)
            }
        };
        self.reloads.push(Reload {
            at: self.now,
            file: file.to_string(),
            outcome,
        });
    }

    /// Hands every MAD the fabric delivered to its SM, then runs the timers that are due.
    fn deliver_and_time(&mut self) {
        // Logs of a simulated run tell virtual time, not the wall clock's.
        let _t =
            tracing::debug_span!("sim", t = %sm_sim::scenario::format_time(self.now)).entered();
        self.scenario_sms();
        let now = Instant::from_nanos(self.now);
        if self.sm_running {
            while let Some(m) = self.sim.recv(self.ep) {
                let perf = m.mad[1] == u8::from(sm_mad::MgmtClass::Perf);
                match self.perf.as_mut() {
                    Some(p) if perf => p.handle_mad(now, &m.mad),
                    _ => self.sm.handle_mad(now, m.slid, &m.mad),
                }
            }
            if self.sm.poll_timeout().is_some_and(|t| t <= now) {
                self.sm.handle_timeout(now);
            }
            if let Some(p) = self.perf.as_mut() {
                let master = self.sm.sm_state() == sm_mad::sm_info::SmState::Master;
                if master && self.sm.is_up() && p.due(now) {
                    if let Some(plan) = self.sm.plan() {
                        p.start(now, crate::perf::targets(&plan.fabric));
                    }
                }
                if p.poll_timeout().is_some_and(|t| t <= now) {
                    p.handle_timeout(now);
                }
            }
        }
        for p in self.peers.iter_mut().filter(|p| p.running) {
            // Logs say which SM speaks.
            let _span = tracing::info_span!("sm", port = p.port.0).entered();
            while let Some(m) = self.sim.recv(p.ep) {
                p.sm.handle_mad(now, m.slid, &m.mad);
            }
            if p.sm.poll_timeout().is_some_and(|t| t <= now) {
                p.sm.handle_timeout(now);
            }
        }
    }

    /// Hands the cores' queued MADs to the fabric.
    fn flush(&mut self) {
        while let Some(t) = self.sm.poll_transmit().filter(|_| self.sm_running) {
            if let Err(e) = self.sim.send(self.ep, t.dlid, &t.mad) {
                tracing::warn!("simulated fabric refused a MAD: {e}");
            }
        }
        if let Some(p) = self.perf.as_mut().filter(|_| self.sm_running) {
            while let Some((dlid, mad)) = p.poll_transmit() {
                if let Err(e) = self.sim.send(self.ep, dlid, &mad) {
                    tracing::warn!("simulated fabric refused a MAD: {e}");
                }
            }
        }
        for p in self.peers.iter_mut().filter(|p| p.running) {
            let _span = tracing::info_span!("sm", port = p.port.0).entered();
            while let Some(t) = p.sm.poll_transmit() {
                if let Err(e) = self.sim.send(p.ep, t.dlid, &t.mad) {
                    tracing::warn!("simulated fabric refused a MAD: {e}");
                }
            }
        }
    }

    /// The next time anything is due (fabric event or core deadline).
    pub fn next_deadline(&self) -> Option<Nanos> {
        std::iter::once(self.sim.next_event())
            .chain(std::iter::once(
                self.sm
                    .poll_timeout()
                    .filter(|_| self.sm_running)
                    .map(Instant::as_nanos),
            ))
            .chain(
                self.peers
                    .iter()
                    .filter(|p| p.running)
                    .map(|p| p.sm.poll_timeout().map(Instant::as_nanos)),
            )
            .chain(std::iter::once(self.sa_clients.next_deadline()))
            .chain(std::iter::once(
                self.perf
                    .as_ref()
                    .filter(|_| self.sm_running && self.sm.is_up())
                    .and_then(crate::perf::PerfMgr::poll_timeout)
                    .map(Instant::as_nanos),
            ))
            .flatten()
            .min()
    }

    /// Processes everything due up to `t` without jumping past it (real-time pacing).
    pub fn advance_to(&mut self, t: Nanos) {
        loop {
            self.flush();
            match self.next_deadline() {
                Some(next) if next <= t => {
                    self.now = self.now.max(next);
                    self.sim.advance(self.now);
                    self.deliver_and_time();
                }
                _ => break,
            }
        }
        self.now = self.now.max(t);
        self.sim.advance(self.now);
    }

    /// Starts the SM and runs until an event satisfies `want`, or until `limit` of virtual
    /// time has passed (then `None`).
    pub fn run_until(
        &mut self,
        limit: Nanos,
        mut want: impl FnMut(&Event) -> bool,
    ) -> Option<Event> {
        let deadline = self.now + limit;
        loop {
            while let Some(e) = self.sm.poll_event() {
                if want(&e) {
                    return Some(e);
                }
            }
            if self.now > deadline || !self.step() {
                return None;
            }
        }
    }

    /// Runs until `done` holds of the driver, or `limit` of virtual time has passed; true
    /// when it held. Events of every SM are discarded on the way.
    pub fn run_while(&mut self, limit: Nanos, mut done: impl FnMut(&SimDriver) -> bool) -> bool {
        let deadline = self.now + limit;
        loop {
            while self.sm.poll_event().is_some() {}
            for p in &mut self.peers {
                while p.sm.poll_event().is_some() {}
            }
            if done(self) {
                return true;
            }
            if self.now > deadline || !self.step() {
                return done(self);
            }
        }
    }

    /// Starts the SM: its port claims an SM (IsSM, as the kernel sets it for an SM holding
    /// the port's `issm` device) and the first sweep begins.
    pub fn start(&mut self) {
        self.sim.set_is_sm(self.sm_port, true);
        self.sm.start(Instant::from_nanos(self.now));
    }
}
