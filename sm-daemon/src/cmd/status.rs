//! `ibsm status` and `ibsm ports`: ask the running SM over its status socket.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use sm_daemon::ops::{PortRow, Status, request};

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  ibsm status --state-dir /var/cache/ibsm
  ibsm status --config /etc/ibsm.toml --json
  ibsm ports --socket /run/ibsm.sock --down
  ibsm ports --state-dir /var/cache/ibsm --clear 0x0002c90300001234:5")]
pub(crate) struct Args {
    /// The SM's status socket. Default: the configuration's [status] socket, else
    /// ibsm.sock in the state directory.
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// The SM's configuration (for its socket or state directory).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The SM's state directory (default: the configuration's state_dir).
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// Print the answer as JSON.
    #[arg(long)]
    json: bool,
    /// `ports` only: list only ports whose link is not ACTIVE.
    #[arg(long)]
    down: bool,
    /// `ports` only: list only unhealthy ports, with why.
    #[arg(long)]
    unhealthy: bool,
    /// `ports` only: take an unhealthy port back into the subnet (`0xGUID:PORT`).
    #[arg(long, value_name = "GUID:PORT")]
    clear: Option<String>,
}

fn socket(a: &Args) -> anyhow::Result<PathBuf> {
    if let Some(s) = &a.socket {
        return Ok(s.clone());
    }
    let cfg = match &a.config {
        Some(p) => sm_core::config::Config::load(p)?,
        None => sm_core::config::Config::default(),
    };
    if let Some(s) = cfg.status.socket {
        return Ok(s);
    }
    Ok(a.state_dir
        .clone()
        .unwrap_or(cfg.sm.state_dir)
        .join("ibsm.sock"))
}

/// Sends one request line and returns the answer.
fn ask(a: &Args, what: &str) -> anyhow::Result<String> {
    let path = socket(a)?;
    let mut s = UnixStream::connect(&path).with_context(|| {
        format!(
            "{}: no running ibsm answers there (is it running, with this state directory?)",
            path.display()
        )
    })?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    writeln!(s, "{what}").with_context(|| format!("{}: writing", path.display()))?;
    let mut text = String::new();
    for line in BufReader::new(s).lines() {
        text.push_str(&line.with_context(|| format!("{}: reading", path.display()))?);
        text.push('\n');
    }
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) {
        if let Some(e) = v.get("error").and_then(|e| e.as_str()) {
            bail!("{}: {e}", path.display());
        }
    }
    Ok(text)
}

fn ago(t: f64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let s = (now - t).max(0.0);
    if s < 120.0 {
        format!("{s:.0} s ago")
    } else if s < 7200.0 {
        format!("{:.0} min ago", s / 60.0)
    } else {
        format!("{:.1} h ago", s / 3600.0)
    }
}

pub(crate) fn status(a: Args) -> anyhow::Result<()> {
    let text = ask(&a, request::STATUS)?;
    if a.json {
        print!("{text}");
        return Ok(());
    }
    let s: Status = serde_json::from_str(&text).context("the status answer")?;
    let mut out = String::new();
    let mut row = |k: &str, v: String| out.push_str(&format!("{k:<14} {v}\n"));
    row(
        "SM",
        format!("{} (priority {}, LID {})", s.sm_state, s.priority, s.sm_lid),
    );
    if let Some(m) = &s.master {
        row("master", m.clone());
    }
    row(
        "subnet",
        match (s.subnet_up, s.up_since) {
            (true, Some(t)) => format!("UP since {}", ago(t)),
            (true, None) => "UP".into(),
            (false, _) => "DOWN".into(),
        },
    );
    row(
        "fabric",
        format!(
            "{} nodes ({} switches, {} CAs, {} routers), {} links, {} LIDs",
            s.nodes, s.switches, s.cas, s.routers, s.links, s.lids
        ),
    );
    if let Some(l) = &s.last_sweep {
        row(
            "last sweep",
            format!(
                "#{} {} ({}), {:.1} ms, {} SMPs, {} LFT blocks{}",
                l.sweep,
                if l.heavy { "heavy" } else { "repair" },
                l.trigger,
                l.sweep_ms,
                l.smps,
                l.lft_blocks_sent,
                match (l.heavy, l.paths_exposed) {
                    (true, _) => String::new(),
                    (false, 0) => format!(", recovery {:.1} ms", l.recovery_ms),
                    (false, n) => format!(
                        ", recovery {:.1} ms, {n} paths exposed on their old SL",
                        l.recovery_ms
                    ),
                }
            ),
        );
    }
    row(
        "SMPs",
        format!(
            "{} sent, {} retried, {} lost",
            s.smps_sent, s.smps_retried, s.smps_lost
        ),
    );
    row("SA queries", s.sa_queries.to_string());
    if let Some(r) = &s.last_reload {
        row("last reload", r.clone());
    }
    for u in &s.unresponsive {
        row("unresponsive", format!("{} \"{}\"", u.node, u.description));
    }
    for u in &s.unhealthy {
        row("unhealthy", format!("{}:{} {}", u.node, u.port, u.reason));
    }
    for d in &s.duplicate_guids {
        row(
            "duplicate GUID",
            format!(
                "{} ({}): kept {}; left out {} ({})",
                d.guid,
                d.kind,
                d.kept,
                d.left_out.join(", "),
                d.why
            ),
        );
    }
    print!("{out}");
    if !s.recent_events.is_empty() {
        println!("recent events:");
        for e in &s.recent_events {
            println!("  {:>12}  {:<11} {}", ago(e.time), e.kind, e.what);
        }
    }
    Ok(())
}

pub(crate) fn ports(a: Args) -> anyhow::Result<()> {
    if let Some(p) = &a.clear {
        if sm_daemon::ops::parse_port(p).is_none() {
            bail!("--clear {p}: expected 0xGUID:PORT");
        }
        ask(&a, &format!("{} {p}", request::CLEAR))?;
        println!("{p}: cleared; the SM sweeps to take its link back");
        return Ok(());
    }
    if a.unhealthy {
        let s: Status = serde_json::from_str(&ask(&a, request::STATUS)?)?;
        if a.json {
            println!("{}", serde_json::to_string_pretty(&s.unhealthy)?);
        } else {
            for u in &s.unhealthy {
                println!("{}:{}  {}", u.node, u.port, u.reason);
            }
        }
        return Ok(());
    }
    let text = ask(&a, request::PORTS)?;
    let mut rows: Vec<PortRow> = serde_json::from_str(&text).context("the ports answer")?;
    if a.down {
        rows.retain(|r| r.peer.is_some() && r.state != "Active");
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    let counters = rows.iter().any(|r| r.counters.is_some());
    let extra = if counters {
        format!(" {:>8} {:>6} {:>9}", "errors", "downs", "errors/s")
    } else {
        String::new()
    };
    println!(
        "{:<20} {:<24} {:>4} {:>6} {:<8} {:<5} {:<5}{extra} peer",
        "node", "description", "port", "lid", "state", "width", "speed"
    );
    for r in rows {
        let desc: String = r.description.chars().take(24).collect();
        let extra = match (counters, r.counters) {
            (false, _) => String::new(),
            (true, Some(t)) => format!(
                " {:>8} {:>6} {:>9.2}",
                t.errors(),
                t.link_downed,
                r.error_rate.unwrap_or(0.0)
            ),
            (true, None) => format!(" {:>8} {:>6} {:>9}", "-", "-", "-"),
        };
        println!(
            "{:<20} {:<24} {:>4} {:>6} {:<8} {:<5} {:<5}{extra} {}",
            r.node,
            desc,
            r.port,
            r.lid,
            r.state,
            r.width,
            r.speed,
            r.peer.as_deref().unwrap_or("-")
        );
    }
    Ok(())
}
