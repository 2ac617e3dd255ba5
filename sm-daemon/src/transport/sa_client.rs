//! The SA clients of a simulated fabric's hosts: what a scenario's `join`, `leave` and
//! `service` lines ask of the SA, sent from an endpoint on the host's port as its SA
//! library would (one MAD, resent after a second without an answer, three tries), with
//! every answer kept ([`SaClients::requests`]).

use sm_core::fabric::PortIdx;
use sm_mad::mcmember_record::{self as mcr, JoinState};
use sm_mad::{Gid, Lid, MadStatus, Method, PKey, Tid, Wire, sa, service_record};
use sm_sim::{EndpointId, Sim, SmEvent};

/// Virtual nanoseconds.
type Nanos = u64;

/// A second of virtual time: how long a client waits before it asks again.
const RESEND_NS: Nanos = 1_000_000_000;
/// Tries of one request.
const TRIES: u32 = 3;

/// One request a host's SA client sent, and how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaRequest {
    pub port: PortIdx,
    /// `join MGID`, `leave MGID` or `service ID`.
    pub what: String,
    /// When the scenario asked for it.
    pub at: Nanos,
    /// The answer's status; `None` while unanswered (or never sent: the port had no LID
    /// or no SM LID yet).
    pub status: Option<MadStatus>,
    /// The answer's first record (a Get's GetResp data).
    pub data: Option<Vec<u8>>,
    tid: u64,
    bytes: Vec<u8>,
    tries: u32,
    last_sent: Nanos,
}

/// The SA clients of every port a scenario's SA lines named.
#[derive(Debug, Default)]
pub struct SaClients {
    eps: Vec<(PortIdx, EndpointId)>,
    next_tid: u64,
    requests: Vec<SaRequest>,
}

impl SaClients {
    /// Every request so far, in the order the scenario asked.
    pub fn requests(&self) -> &[SaRequest] {
        &self.requests
    }

    /// Whether `e` is a client request; if so it is sent (or queued) now.
    pub(crate) fn take(&mut self, sim: &mut Sim, now: Nanos, e: &SmEvent) -> bool {
        let (port, what, bytes) = match *e {
            SmEvent::Join {
                port,
                mgid,
                pkey,
                send_only,
            } => {
                let state = if send_only {
                    JoinState::SEND_ONLY_FULL_MEMBER
                } else {
                    JoinState::FULL_MEMBER
                };
                let rec = member(sim, port, mgid, pkey, state);
                let req = request(
                    Method::Set,
                    mcr::ATTR_ID,
                    sm_core::mcast::CREATE_COMPS,
                    &rec,
                );
                (port, format!("join {mgid:#x}"), req)
            }
            SmEvent::Leave { port, mgid } => {
                let rec = member(sim, port, mgid, 0xffff, JoinState::FULL_MEMBER);
                let req = request(
                    Method::Delete,
                    mcr::ATTR_ID,
                    sm_core::mcast::JOIN_COMPS,
                    &rec,
                );
                (port, format!("leave {mgid:#x}"), req)
            }
            SmEvent::Service { port, id, lease } => {
                use service_record::comp;
                let rec = service_record::Repr {
                    service_id: service_record::ServiceId(id),
                    service_gid: port_gid(sim, port),
                    service_p_key: PKey(0xffff),
                    service_lease: service_record::Lease(lease.unwrap_or(u32::MAX)),
                    service_name: service_record::ServiceName::new("soak"),
                    ..service_record::Repr::default()
                };
                let mask = comp::SERVICE_ID
                    | comp::SERVICE_GID
                    | comp::SERVICE_P_KEY
                    | comp::SERVICE_LEASE
                    | comp::SERVICE_NAME;
                let req = request(Method::Set, service_record::ATTR_ID, mask, &rec);
                (port, format!("service {id:#x}"), req)
            }
            _ => return false,
        };
        self.next_tid += 1;
        let tid = 0x5c00_0000 + self.next_tid;
        let mut r = SaRequest {
            port,
            what,
            at: now,
            status: None,
            data: None,
            tid,
            bytes: bytes.unwrap_or_default(),
            tries: 0,
            last_sent: now,
        };
        if !r.bytes.is_empty() {
            r.bytes[8..16].copy_from_slice(&tid.to_be_bytes());
            self.send(sim, now, &mut r);
        } else {
            r.tries = TRIES;
        }
        self.requests.push(r);
        true
    }

    /// A PathRecord Get from `port` to `dgid` (with `pkey` when given); its TID.
    pub fn ask_path(
        &mut self,
        sim: &mut Sim,
        now: Nanos,
        port: PortIdx,
        dgid: Gid,
        pkey: Option<PKey>,
    ) -> u64 {
        use sm_mad::path_record::{self as pr, comp};
        let rec = pr::Repr {
            sgid: port_gid(sim, port),
            dgid,
            p_key: pkey.unwrap_or(PKey(0)),
            ..pr::Repr::default()
        };
        let mut mask = comp::SGID | comp::DGID;
        if pkey.is_some() {
            mask |= comp::P_KEY;
        }
        self.next_tid += 1;
        let tid = 0x5c00_0000 + self.next_tid;
        let mut r = SaRequest {
            port,
            what: format!("path to {dgid:?}"),
            at: now,
            tid,
            bytes: request(Method::Get, pr::ATTR_ID, mask, &rec).unwrap_or_default(),
            ..SaRequest::default()
        };
        if r.bytes.is_empty() {
            return tid;
        }
        r.tries = 0;
        r.bytes[8..16].copy_from_slice(&tid.to_be_bytes());
        self.send(sim, now, &mut r);
        self.requests.push(r);
        tid
    }

    /// The answer to the PathRecord Get `tid`: the record, or the status of a refusal;
    /// `None` while unanswered.
    pub fn answer(&self, tid: u64) -> Option<Result<sm_mad::path_record::Repr, MadStatus>> {
        let r = self.requests.iter().find(|r| r.tid == tid)?;
        let status = r.status?;
        if status != MadStatus::OK {
            return Some(Err(status));
        }
        let data = r.data.as_deref()?;
        Some(sm_mad::path_record::Repr::parse(data).map_err(|_| MadStatus::INVALID_FIELD))
    }

    fn endpoint(&mut self, sim: &mut Sim, port: PortIdx) -> EndpointId {
        if let Some(&(_, ep)) = self.eps.iter().find(|(p, _)| *p == port) {
            return ep;
        }
        // Beside an SM that may run on the same port: only SA responses come here.
        let ep = sim.attach_client(port, sm_mad::mad::MgmtClass::SubnAdm.to_raw_value());
        self.eps.push((port, ep));
        ep
    }

    fn send(&mut self, sim: &mut Sim, now: Nanos, r: &mut SaRequest) {
        r.tries += 1;
        r.last_sent = now;
        let sm_lid = sim.port(r.port).info.master_sm_lid;
        if sm_lid == Lid(0) {
            return;
        }
        let ep = self.endpoint(sim, r.port);
        if let Err(e) = sim.send(ep, sm_lid, &r.bytes) {
            tracing::debug!("an SA client's request was refused by the fabric: {e}");
        }
    }

    /// Takes the answers that arrived and asks again what went unanswered too long.
    pub(crate) fn poll(&mut self, sim: &mut Sim, now: Nanos) {
        for &(_, ep) in &self.eps {
            while let Some(m) = sim.recv(ep) {
                let Ok(head) = sa::Repr::parse(&m.mad) else {
                    continue;
                };
                if let Some(r) = self
                    .requests
                    .iter_mut()
                    .find(|r| r.tid & 0xffff_ffff == head.tid.0 & 0xffff_ffff)
                {
                    if r.status.is_none() {
                        r.status = Some(head.status);
                        r.data = Some(head.data.0.to_vec());
                    }
                }
            }
        }
        let mut due = Vec::new();
        for (i, r) in self.requests.iter().enumerate() {
            if r.status.is_none() && r.tries < TRIES && now >= r.last_sent + RESEND_NS {
                due.push(i);
            }
        }
        for i in due {
            let mut r = std::mem::take(&mut self.requests[i]);
            self.send(sim, now, &mut r);
            self.requests[i] = r;
        }
    }

    /// The next time a request is due to be sent again.
    pub(crate) fn next_deadline(&self) -> Option<Nanos> {
        self.requests
            .iter()
            .filter(|r| r.status.is_none() && r.tries < TRIES)
            .map(|r| r.last_sent + RESEND_NS)
            .min()
    }
}

impl Default for SaRequest {
    fn default() -> Self {
        SaRequest {
            port: PortIdx(0),
            what: String::new(),
            at: 0,
            status: None,
            data: None,
            tid: 0,
            bytes: Vec::new(),
            tries: TRIES,
            last_sent: 0,
        }
    }
}

fn port_gid(sim: &Sim, port: PortIdx) -> Gid {
    Gid::new(sm_core::mcast::DEFAULT_SUBNET_PREFIX, sim.port(port).guid)
}

fn member(sim: &Sim, port: PortIdx, mgid: u128, pkey: u16, state: JoinState) -> mcr::Repr {
    mcr::Repr {
        mgid: Gid(mgid.to_be_bytes()),
        port_gid: port_gid(sim, port),
        q_key: 0x1234,
        p_key: PKey(pkey),
        join_state: state,
        ..mcr::Repr::default()
    }
}

/// The request's bytes (TID 0), or `None` if the record does not encode.
fn request(method: Method, attr: u16, mask: u64, rec: &impl Wire) -> Option<Vec<u8>> {
    let mut r = sa::Repr::request(method, Tid(0), attr, mask);
    rec.emit(&mut r.data.0).ok()?;
    let mut b = r.to_bytes().ok()?.to_vec();
    b.resize(256, 0);
    Some(b)
}
