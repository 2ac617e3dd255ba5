//! `ibsm events`: subscribe to the SA's event forwarding (InformInfo) from a kernel umad
//! port and print every Report(Notice) that comes, answering each with its ReportResp.
//! Any SA that forwards traps serves it (ibsm's, OpenSM's); under ibsim it runs through
//! libumad2sim like the diags.

use std::time::Duration;

use anyhow::{Context, bail};
use sm_mad::inform_info::{self, ALL_LIDS, NoticeType};
use sm_mad::notice;
use sm_mad::{Lid, MadStatus, Method, Tid, attr, sa};
use tokio::time::Instant;

use sm_daemon::transport::umad::{self, Incoming, Outgoing, Umad};

/// Arguments of `ibsm events`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The port to listen on, `DEVICE[:PORT]` (default: the first port whose link is up).
    device: Option<String>,
    /// A generic trap number to subscribe to (repeat for several); every trap when absent.
    #[arg(long = "trap")]
    traps: Vec<u16>,
    /// Stop after this many Reports.
    #[arg(long)]
    count: Option<u64>,
    /// Stop after this many seconds.
    #[arg(long)]
    timeout: Option<f64>,
    /// One JSON object per Report instead of a line of text.
    #[arg(long)]
    json: bool,
    /// Hold `issmN` while listening. ibsim hands an unsolicited request on QP1 (a Report)
    /// only to a client holding it; on real hardware it would show this port as an SM's
    /// (another SM then queries it with SMInfo, which goes unanswered).
    #[arg(long)]
    issm: bool,
}

/// How long to wait for the SA's answer to a subscription, and how many times to ask.
const ANSWER_WAIT: Duration = Duration::from_millis(1000);
const TRIES: u32 = 3;
/// The QP this listener's requests leave from (the SA keeps it as the Report address).
const OWN_QP: u32 = 1;
/// TIDs of this listener's own requests.
const FIRST_TID: u64 = 0x1b5e_0000;

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let port = umad::device::choose(args.device.as_deref())?;
    if port.sm_lid.0 == 0 {
        bail!("{port}: the port knows no SM LID (is an SM running, the port ACTIVE?)");
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    rt.block_on(listen(args, port))
}

fn subscription(trap: Option<u16>, subscribe: bool) -> inform_info::Repr {
    inform_info::Repr {
        lid_range_begin: ALL_LIDS,
        is_generic: true,
        subscribe,
        r#type: NoticeType::All,
        trap_number: trap.unwrap_or(inform_info::ALL_TRAPS),
        qpn: OWN_QP,
        producer_type: 0xFF_FFFF,
        ..inform_info::Repr::default()
    }
}

/// A MAD as 256 bytes: some SAs send answers only as long as their data (OpenSM's
/// GetResp(InformInfo) is 92 bytes), and under libumad2sim they arrive that short.
fn whole(mad: &[u8]) -> [u8; 256] {
    let mut b = [0u8; 256];
    let n = mad.len().min(256);
    b[..n].copy_from_slice(&mad[..n]);
    b
}

/// Sends Set(InformInfo) and waits for its GetResp; Reports that come meanwhile are kept.
async fn set_inform(
    dev: &mut Umad,
    sm_lid: Lid,
    ii: &inform_info::Repr,
    tid: u64,
    early: &mut Vec<Incoming>,
) -> anyhow::Result<()> {
    let mut req = sa::Repr::request(Method::Set, Tid(tid), inform_info::ATTR_ID, 0);
    ii.emit(&mut req.data.0)?;
    let mad = req.to_bytes()?;
    for _ in 0..TRIES {
        let mut o = Outgoing::gsi(sm_lid, 1, 0, 0, mad.to_vec());
        o.timeout_ms = ANSWER_WAIT.as_millis() as u32;
        dev.send(o)?;
        let deadline = Instant::now() + ANSWER_WAIT;
        while let Ok(Some(m)) = tokio::time::timeout_at(deadline, dev.recv()).await {
            let Ok(h) = sa::Repr::parse(&whole(&m.mad)) else {
                continue;
            };
            if h.method == Method::Report {
                early.push(m);
                continue;
            }
            if h.method == Method::GetResp && h.tid.low32() == Tid(tid).low32() {
                if h.status != MadStatus::OK {
                    bail!(
                        "the SA refused the subscription (trap {}): status {:#06x}",
                        ii.trap_number,
                        h.status.0
                    );
                }
                return Ok(());
            }
        }
    }
    bail!("no answer from the SA at LID {sm_lid} to Set(InformInfo) after {TRIES} tries")
}

/// Prints one Report and answers it; false when it is not a Report of a Notice.
fn report(dev: &Umad, m: &Incoming, json: bool) -> anyhow::Result<bool> {
    let Ok(h) = sa::Repr::parse(&whole(&m.mad)) else {
        return Ok(false);
    };
    if h.method != Method::Report || h.attr_id != attr::NOTICE {
        return Ok(false);
    }
    let n = notice::Repr::parse(&h.data.0)
        .with_context(|| format!("a Report(Notice) from LID {} that does not parse", m.slid))?;
    if json {
        println!("{}", serde_json::to_string(&n)?);
    } else {
        let number = n.trap_number();
        let name = number
            .and_then(notice::trap::name)
            .unwrap_or("vendor notice");
        let gid = n.issuer_gid.map(|g| g.to_string()).unwrap_or_default();
        println!(
            "trap {} ({name}) from LID {} {gid}: {}",
            number.map_or_else(|| "-".to_string(), |t| t.to_string()),
            n.issuer_lid,
            serde_json::to_string(&n)?
        );
    }
    let mut resp = h;
    resp.method = Method::ReportResp;
    let mut o = Outgoing::gsi(m.slid, m.qpn, m.sl, m.pkey_index, resp.to_bytes()?.to_vec());
    o.timeout_ms = 0;
    dev.send(o)?;
    Ok(true)
}

async fn listen(args: Args, port: umad::device::PortDesc) -> anyhow::Result<()> {
    let sm_lid = port.sm_lid;
    // Holding IsSM, the port looks like an SM's: an SM may send it SMPs (SMInfo), which the
    // shim can only hand to registered SMI agents; they are read and ignored.
    let opts = umad::Options {
        issm: args.issm,
        smi: args.issm,
        ..umad::Options::sa_client()
    };
    let mut dev = Umad::open(port, opts)?;
    let traps: Vec<Option<u16>> = if args.traps.is_empty() {
        vec![None]
    } else {
        args.traps.iter().copied().map(Some).collect()
    };
    let mut early = Vec::new();
    let mut tid = FIRST_TID;
    for &t in &traps {
        tid += 1;
        set_inform(&mut dev, sm_lid, &subscription(t, true), tid, &mut early).await?;
    }
    eprintln!(
        "ibsm events: subscribed at the SA (LID {sm_lid}) to {}",
        if args.traps.is_empty() {
            "every trap".to_string()
        } else {
            format!("traps {:?}", args.traps)
        }
    );
    let deadline = args
        .timeout
        .map(|s| Instant::now() + Duration::from_secs_f64(s.max(0.0)));
    let mut seen = 0u64;
    let done = |seen: u64| args.count.is_some_and(|c| seen >= c);
    for m in std::mem::take(&mut early) {
        if report(&dev, &m, args.json)? {
            seen += 1;
        }
    }
    while !done(seen) {
        let next = match deadline {
            Some(d) => match tokio::time::timeout_at(d, dev.recv()).await {
                Ok(m) => m,
                Err(_) => break,
            },
            None => dev.recv().await,
        };
        let Some(m) = next else {
            bail!("the umad device closed");
        };
        if report(&dev, &m, args.json)? {
            seen += 1;
        }
    }
    // Best effort: a listener that leaves takes its subscriptions with it.
    for &t in &traps {
        tid += 1;
        if let Err(e) = set_inform(&mut dev, sm_lid, &subscription(t, false), tid, &mut early).await
        {
            eprintln!("ibsm events: unsubscribing: {e:#}");
        }
    }
    eprintln!("ibsm events: {seen} Reports");
    Ok(())
}
