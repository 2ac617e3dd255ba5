//! Fault scenarios as text: one timed event per line, for tests and for
//! `ibsm run --sim FABRIC --scenario FILE`.
//!
//! ```text
//! # a comment; blank lines are ignored
//! at 0      loss 0.05                       # every MAD: 5 % lost (end to end)
//! at 0      loss 0.2 link "leaf 3"[1]       # ... and 20 % more on one link (each crossing)
//! at 0      silent "leaf 1"                 # receives SMPs, never answers
//! at 0      slow "leaf 2" 5ms               # answers 5 ms later than the others
//! at 1ms    flap 0x0002000100000004[2] period 100us count 5
//! at 5ms    link-down "leaf 3"[1]
//! at 6ms    link-up "leaf 3"[1]
//! at 20ms   reboot "spine 0"
//! at 30ms   remove "host 7 leaf 3"
//! at 40ms   recable "a"[1] "c"[2]
//! ```
//!
//! # Lines
//!
//! `at TIME ACTION ARGS... [# comment]`. Events may come in any order; events at the same
//! time happen in file order. Times count from the moment the scenario is loaded
//! ([`crate::Sim::load_scenario`]), which is usually virtual time 0.
//!
//! - **TIME**: `0`, or a number with a unit `ns`, `us`, `ms` or `s`: `250us`, `10ms`,
//!   `1.5ms` (at most nanosecond precision).
//! - **NODE**: a node GUID in hex (`0x0002000100000004` or `0002:0001:0000:0004`; the port
//!   GUID of a CA port names its node too), or a node description in double quotes (`"leaf 3"`), which must name
//!   exactly one node. A quote inside a description is written `\"`, a backslash `\\`.
//! - **PORT**: a node followed at once by a port number in brackets: `"leaf 3"[1]`,
//!   `0x0002000100000004[2]`.
//! - **P**: a probability from 0 to 1 (`0.05`).
//!
//! # Actions
//!
//! | action | meaning |
//! |---|---|
//! | `link-down PORT` | the link at PORT goes down (both ends DOWN / Polling), the cable stays |
//! | `link-up PORT` | the link at PORT trains again (both ends INIT) |
//! | `flap PORT period TIME count N [down TIME]` | N times: down, then up after `down` (default half the period); one cycle per period |
//! | `reboot NODE [down TIME]` | the node powers up afresh: LIDs 0, tables empty, SwitchInfo as at power-up, M_Key cleared; its links go down and train again to INIT on both ends, after `down` (default 0) during which the node answers nothing |
//! | `remove NODE` | the node is gone for good: its links are removed, it answers nothing |
//! | `unplug NODE` | the node is unplugged: its links go down (the neighbours notice), it answers nothing, its cables stay for `plug` |
//! | `plug NODE` | an unplugged node is plugged in: it powers up afresh (as after `reboot`) and its links train to INIT. `at 0 unplug` then a later `plug` is a node hot-plugged into the running fabric |
//! | `silent NODE [off]` | the node's agent receives SMPs but never answers (`off` ends it) |
//! | `slow NODE TIME` | the node's agent answers TIME later than normal (`0` ends it) |
//! | `stubborn NODE [off]` | the node's agent answers PortInfo Sets but keeps LinkSpeedEnabled and M_KeyLeasePeriod (as ibsim's agents do) |
//! | `recable PORT PORT` | the cable at the first port is moved to the second: its old peer and the second port's old peer (if any) lose their links, the two ports link and train to INIT |
//! | `set-lft NODE LID PORT` | the switch's forwarding entry for LID is overwritten with PORT (255 clears it), behind the SM's back (a rogue SM, a corrupted table): nothing traps |
//! | `clone-guid NODE NODE` | the second node's agent answers with the first's GUIDs from then on (NodeGUID, SystemImageGUID, and each port's PortGUID by port number; a switch's ports all carry its GUID), as a card flashed with another's image does; a GUID two nodes then answer with names the first of them in the fabric file |
//! | `loss P [TARGET]` | probability that a MAD is lost |
//! | `duplicate P [TARGET]` | probability that a MAD is delivered twice |
//! | `reorder P TIME [TARGET]` | probability that a MAD is held back by up to TIME, so later ones overtake it |
//! | `delay TIME [TARGET]` | fixed extra latency |
//! | `clear-faults [TARGET]` | loss, duplicate, reorder and delay back to none |
//! | `start-sm PORT [priority N] [sm-key K]` | an SM starts on an end port (a CA port or a switch's port 0), SMInfo priority N (default 0), SM_Key K (default: the running SM's) |
//! | `stop-sm PORT` | the SM on that port dies (answers nothing from then on) |
//! | `reload FILE` | the SM under test reads its configuration again from FILE (a path relative to the scenario file), as on SIGHUP |
//! | `join PORT MGID [pkey K] [send-only]` | the end port's SA client joins multicast group MGID (32 hex digits, `0x...`) as a full member (or send-only full member), creating the group if it is new (Q_Key 0x1234, SL 0, P_Key K, default 0xffff) |
//! | `leave PORT MGID` | the end port's SA client leaves the group |
//! | `service PORT ID [lease S]` | the end port's SA client registers a ServiceRecord with service ID ID (`0x...` or decimal) and a lease of S seconds (default: indefinite) |
//! | `probe FROM TO ATTR [m-key K]` | end port FROM sends SubnGet(ATTR) LID-routed to the LID of port TO with M_Key K (default 0), as `smpquery` would; ATTR by name (`PortInfo`, `SMInfo`...) or number; the answer is kept ([`crate::Sim::probes`]) |
//!
//! TARGET is `link PORT` (each crossing of that link, either way), `node NODE` (every SMP
//! the node's agent receives or sends), or nothing: the whole fabric, applied once per MAD
//! end to end. Every link state change on a switch port sets SwitchInfo.PortStateChange and
//! makes the switch send Trap 128 (a change of a CA port is seen by the switch at the other
//! end).
//!
//! [`Scenario::parse`] checks the text only; names are resolved against a fabric by
//! [`crate::Sim::load_scenario`]. Both report the file, line and what is wrong.

use sm_mad::Guid;

use crate::Nanos;

/// A node named in a scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeRef {
    /// By node GUID (or the port GUID of a CA port).
    Guid(Guid),
    /// By node description.
    Desc(String),
}

impl std::fmt::Display for NodeRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NodeRef::Guid(g) => write!(f, "{:#018x}", g.0),
            NodeRef::Desc(d) => write!(f, "{d:?}"),
        }
    }
}

/// A port named in a scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortRef {
    pub node: NodeRef,
    pub port: u8,
}

impl std::fmt::Display for PortRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}[{}]", self.node, self.port)
    }
}

/// Where fault settings apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target<N = NodeRef, P = PortRef> {
    /// Every MAD, once end to end.
    Fabric,
    /// Each crossing of one link.
    Link(P),
    /// Every SMP one node's agent receives or sends.
    Node(N),
}

/// One fault setting.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FaultParam {
    Loss(f64),
    Duplicate(f64),
    /// Probability and largest hold-back.
    Reorder(f64, Nanos),
    Delay(Nanos),
}

/// What happens, with nodes and ports as named in the text.
#[derive(Debug, Clone, PartialEq)]
pub enum Action<N = NodeRef, P = PortRef> {
    LinkDown(P),
    LinkUp(P),
    Flap {
        port: P,
        period: Nanos,
        count: u32,
        /// How long each down phase lasts (default half the period).
        down: Option<Nanos>,
    },
    Reboot {
        node: N,
        down: Nanos,
    },
    Remove(N),
    /// The node is unplugged: links down, cables kept, it answers nothing until `Plug`.
    Unplug(N),
    /// An unplugged node is plugged in again and powers up afresh.
    Plug(N),
    Silent {
        node: N,
        on: bool,
    },
    Slow {
        node: N,
        delay: Nanos,
    },
    Stubborn {
        node: N,
        on: bool,
    },
    Recable {
        from: P,
        to: P,
    },
    /// A switch's forwarding entry for `lid` overwritten with `port`, behind the SM's back.
    SetLft {
        node: N,
        lid: u16,
        port: u8,
    },
    /// Node `to` answers with the GUIDs of node `from` (a cloned or mis-flashed device).
    CloneGuid {
        from: N,
        to: N,
    },
    Fault {
        target: Target<N, P>,
        param: FaultParam,
    },
    ClearFaults(Target<N, P>),
    /// An SM starts on an end port (the driver of the simulation runs it; the fabric only
    /// passes the word on, see [`crate::Sim::poll_sm_event`]).
    StartSm {
        port: P,
        priority: u8,
        /// Its SM_Key; `None`: the same as the SM under test.
        sm_key: Option<u64>,
    },
    /// The SM on an end port dies: it answers nothing from then on.
    StopSm(P),
    /// An end port sends SubnGet(`attr`) LID-routed to another port's LID, as `smpquery`
    /// would, with M_Key `m_key`; see [`crate::Sim::probes`].
    Probe {
        from: P,
        to: P,
        attr: u16,
        m_key: u64,
    },
    /// The SM under test reads its configuration again from a file (relative to the
    /// scenario's directory); the driver carries it out.
    Reload(String),
    /// An end port's SA client joins a multicast group (the driver carries it out).
    Join {
        port: P,
        mgid: u128,
        pkey: u16,
        send_only: bool,
    },
    /// An end port's SA client leaves a multicast group.
    Leave {
        port: P,
        mgid: u128,
    },
    /// An end port's SA client registers a service; `lease` in seconds, `None` indefinite.
    Service {
        port: P,
        id: u64,
        lease: Option<u32>,
    },
}

/// A time as a scenario writes it: the largest unit that keeps it exact.
pub fn format_time(ns: Nanos) -> String {
    match ns {
        0 => "0".into(),
        n if n % 1_000_000_000 == 0 => format!("{}s", n / 1_000_000_000),
        n if n % 1_000_000 == 0 => format!("{}ms", n / 1_000_000),
        n if n % 1_000 == 0 => format!("{}us", n / 1_000),
        n => format!("{n}ns"),
    }
}

fn write_target(f: &mut std::fmt::Formatter<'_>, t: &Target) -> std::fmt::Result {
    match t {
        Target::Fabric => Ok(()),
        Target::Link(p) => write!(f, " link {p}"),
        Target::Node(n) => write!(f, " node {n}"),
    }
}

/// The action as a scenario line writes it after `at TIME`: [`Scenario::parse`] reads it
/// back as the same action.
impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let t = format_time;
        match self {
            Action::LinkDown(p) => write!(f, "link-down {p}"),
            Action::LinkUp(p) => write!(f, "link-up {p}"),
            Action::Flap {
                port,
                period,
                count,
                down,
            } => {
                write!(f, "flap {port} period {} count {count}", t(*period))?;
                match down {
                    Some(d) => write!(f, " down {}", t(*d)),
                    None => Ok(()),
                }
            }
            Action::Reboot { node, down: 0 } => write!(f, "reboot {node}"),
            Action::Reboot { node, down } => write!(f, "reboot {node} down {}", t(*down)),
            Action::Remove(n) => write!(f, "remove {n}"),
            Action::Unplug(n) => write!(f, "unplug {n}"),
            Action::CloneGuid { from, to } => write!(f, "clone-guid {from} {to}"),
            Action::SetLft { node, lid, port } => write!(f, "set-lft {node} {lid} {port}"),
            Action::Plug(n) => write!(f, "plug {n}"),
            Action::Silent { node, on } => {
                write!(f, "silent {node}{}", if *on { "" } else { " off" })
            }
            Action::Slow { node, delay } => write!(f, "slow {node} {}", t(*delay)),
            Action::Stubborn { node, on } => {
                write!(f, "stubborn {node}{}", if *on { "" } else { " off" })
            }
            Action::Recable { from, to } => write!(f, "recable {from} {to}"),
            Action::Fault { target, param } => {
                match param {
                    FaultParam::Loss(p) => write!(f, "loss {p}")?,
                    FaultParam::Duplicate(p) => write!(f, "duplicate {p}")?,
                    FaultParam::Reorder(p, j) => write!(f, "reorder {p} {}", t(*j))?,
                    FaultParam::Delay(d) => write!(f, "delay {}", t(*d))?,
                }
                write_target(f, target)
            }
            Action::ClearFaults(target) => {
                write!(f, "clear-faults")?;
                write_target(f, target)
            }
            Action::StartSm {
                port,
                priority,
                sm_key,
            } => {
                write!(f, "start-sm {port} priority {priority}")?;
                match sm_key {
                    Some(k) => write!(f, " sm-key {k:#x}"),
                    None => Ok(()),
                }
            }
            Action::StopSm(p) => write!(f, "stop-sm {p}"),
            Action::Probe {
                from,
                to,
                attr,
                m_key,
            } => write!(f, "probe {from} {to} {attr:#06x} m-key {m_key:#x}"),
            Action::Reload(file) => write!(f, "reload {file:?}"),
            Action::Join {
                port,
                mgid,
                pkey,
                send_only,
            } => write!(
                f,
                "join {port} {mgid:#034x} pkey {pkey:#06x}{}",
                if *send_only { " send-only" } else { "" }
            ),
            Action::Leave { port, mgid } => write!(f, "leave {port} {mgid:#034x}"),
            Action::Service { port, id, lease } => {
                write!(f, "service {port} {id:#x}")?;
                match lease {
                    Some(s) => write!(f, " lease {s}"),
                    None => Ok(()),
                }
            }
        }
    }
}

/// One line of a scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// 1-based line number in the file.
    pub line: usize,
    /// Offset from the moment the scenario is loaded.
    pub at: Nanos,
    pub action: Action,
}

/// A parsed scenario.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Scenario {
    /// The file name errors name.
    pub file: String,
    /// In file order.
    pub events: Vec<Event>,
}

/// What is wrong with a scenario line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScenarioErrorKind {
    #[error("a line starts with `at TIME`, found {0:?}")]
    ExpectedAt(String),
    #[error("missing {0}")]
    Missing(&'static str),
    #[error("bad time {0:?} (expected 0 or a number with ns, us, ms or s)")]
    BadTime(String),
    #[error("time {0:?} is too large")]
    TimeOverflow(String),
    #[error("bad probability {0:?} (expected a number from 0 to 1)")]
    BadProbability(String),
    #[error("bad count {0:?}")]
    BadCount(String),
    #[error("{0} cannot hold an SM (a CA port or a switch's port 0 can)")]
    NotAnEndPort(String),
    #[error("bad SM priority {0:?} (expected 0 to 15)")]
    BadPriority(String),
    #[error("bad SM_Key {0:?} (expected a 64-bit number, 0x... or decimal)")]
    BadSmKey(String),
    #[error("bad M_Key {0:?} (expected a 64-bit number, 0x... or decimal)")]
    BadMKey(String),
    #[error("bad attribute {0:?} (expected an SMP attribute name such as PortInfo, or 0x...)")]
    BadAttribute(String),
    #[error("bad MGID {0:?} (expected 32 hex digits, 0x...)")]
    BadMgid(String),
    #[error("bad P_Key {0:?} (expected a 16-bit number, 0x... or decimal)")]
    BadPKey(String),
    #[error("bad service ID {0:?} (expected a 64-bit number, 0x... or decimal)")]
    BadServiceId(String),
    #[error("bad node {0:?} (expected 0xGUID or \"description\")")]
    BadNode(String),
    #[error("bad port {0:?} (expected NODE[number], number 0..=254)")]
    BadPort(String),
    #[error("unterminated quoted string")]
    Unterminated,
    #[error("unknown action {0:?}")]
    UnknownAction(String),
    #[error("unexpected {0:?}")]
    Unexpected(String),
    #[error("expected {expected}, found {found:?}")]
    Expected {
        expected: &'static str,
        found: String,
    },
    #[error("flap period must be longer than its down time")]
    BadFlap,
    #[error("no node {0}")]
    UnknownNode(String),
    #[error("{0} names {1} nodes")]
    AmbiguousNode(String, usize),
    #[error("node {node} has no port {port}")]
    NoSuchPort { node: String, port: u8 },
    #[error("port {0} has no cable")]
    NotLinked(String),
    #[error("a port cannot be cabled to itself ({0})")]
    SelfLink(String),
}

/// A scenario error: file, line, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {kind}")]
pub struct ScenarioError {
    pub file: String,
    pub line: usize,
    pub kind: ScenarioErrorKind,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Word(String),
    Quoted(String),
}

#[derive(Debug, Clone, PartialEq)]
struct Token {
    tok: Tok,
    /// The `[n]` that followed at once, as written.
    index: Option<String>,
}

impl Token {
    fn text(&self) -> String {
        let base = match &self.tok {
            Tok::Word(w) => w.clone(),
            Tok::Quoted(q) => format!("{q:?}"),
        };
        match &self.index {
            Some(i) => format!("{base}[{i}]"),
            None => base,
        }
    }

    fn word(&self) -> Option<&str> {
        match (&self.tok, &self.index) {
            (Tok::Word(w), None) => Some(w),
            _ => None,
        }
    }
}

type Kind = ScenarioErrorKind;

/// Splits a line into tokens; a `#` outside quotes starts a comment.
fn tokenize(line: &str) -> Result<Vec<Token>, Kind> {
    let mut out = Vec::new();
    let mut it = line.chars().peekable();
    loop {
        while it.next_if(|c| c.is_whitespace()).is_some() {}
        let Some(&c) = it.peek() else { break };
        if c == '#' {
            break;
        }
        let tok = if c == '"' {
            it.next();
            let mut s = String::new();
            loop {
                match it.next() {
                    None => return Err(Kind::Unterminated),
                    Some('"') => break,
                    Some('\\') => match it.next() {
                        Some(e) => s.push(e),
                        None => return Err(Kind::Unterminated),
                    },
                    Some(ch) => s.push(ch),
                }
            }
            Tok::Quoted(s)
        } else {
            let mut s = String::new();
            while let Some(ch) = it.next_if(|&ch| !ch.is_whitespace() && ch != '[' && ch != '#') {
                s.push(ch);
            }
            if s.is_empty() {
                // A `[` with nothing before it.
                s.push('[');
                it.next();
                return Err(Kind::Unexpected(s));
            }
            Tok::Word(s)
        };
        let index = if it.next_if_eq(&'[').is_some() {
            let mut s = String::new();
            loop {
                match it.next() {
                    Some(']') => break,
                    Some(ch) if !ch.is_whitespace() => s.push(ch),
                    _ => {
                        return Err(Kind::BadPort(format!(
                            "{}[{s}",
                            Token {
                                tok: tok.clone(),
                                index: None
                            }
                            .text()
                        )));
                    }
                }
            }
            Some(s)
        } else {
            None
        };
        out.push(Token { tok, index });
    }
    Ok(out)
}

/// Parses a time: `0` or a decimal number with a unit.
pub fn parse_time(s: &str) -> Result<Nanos, ScenarioErrorKind> {
    if s == "0" {
        return Ok(0);
    }
    let bad = || Kind::BadTime(s.to_string());
    let (num, unit) = if let Some(n) = s.strip_suffix("ns") {
        (n, 1u64)
    } else if let Some(n) = s.strip_suffix("us") {
        (n, 1_000)
    } else if let Some(n) = s.strip_suffix("ms") {
        (n, 1_000_000)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1_000_000_000)
    } else {
        return Err(bad());
    };
    let (int, frac) = match num.split_once('.') {
        Some((i, f)) => (i, f),
        None => (num, ""),
    };
    let digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
    if int.is_empty() || !digits(int) || !digits(frac) || (num.contains('.') && frac.is_empty()) {
        return Err(bad());
    }
    let over = || Kind::TimeOverflow(s.to_string());
    let i: u64 = int.parse().map_err(|_| over())?;
    let mut ns = i.checked_mul(unit).ok_or_else(over)?;
    // The fraction, digit by digit: each digit is worth unit / 10^k.
    let mut scale = unit;
    for b in frac.bytes() {
        scale /= 10;
        let d = (b - b'0') as u64;
        if scale == 0 {
            if d != 0 {
                return Err(bad());
            }
            continue;
        }
        ns = ns.checked_add(d * scale).ok_or_else(over)?;
    }
    Ok(ns)
}

fn parse_prob(s: &str) -> Result<f64, Kind> {
    match s.parse::<f64>() {
        Ok(p) if (0.0..=1.0).contains(&p) => Ok(p),
        _ => Err(Kind::BadProbability(s.to_string())),
    }
}

/// A GUID in hex (`0x...` or `xxxx:xxxx:xxxx:xxxx`); a bare decimal number is refused, as
/// in a scenario it would too easily be a LID.
fn parse_guid(s: &str) -> Option<Guid> {
    if s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn node_of(t: &Token) -> Result<NodeRef, Kind> {
    match &t.tok {
        Tok::Quoted(q) => Ok(NodeRef::Desc(q.clone())),
        Tok::Word(w) => parse_guid(w)
            .map(NodeRef::Guid)
            .ok_or_else(|| Kind::BadNode(t.text())),
    }
}

/// The remaining tokens of one line.
struct Line {
    toks: std::vec::IntoIter<Token>,
}

impl Line {
    fn next(&mut self, what: &'static str) -> Result<Token, Kind> {
        self.toks.next().ok_or(Kind::Missing(what))
    }

    fn word(&mut self, what: &'static str) -> Result<String, Kind> {
        let t = self.next(what)?;
        t.word().map(str::to_string).ok_or(Kind::Expected {
            expected: what,
            found: t.text(),
        })
    }

    fn keyword(&mut self, kw: &'static str) -> Result<(), Kind> {
        let t = self.next(kw)?;
        if t.word() == Some(kw) {
            Ok(())
        } else {
            Err(Kind::Expected {
                expected: kw,
                found: t.text(),
            })
        }
    }

    fn time(&mut self, what: &'static str) -> Result<Nanos, Kind> {
        parse_time(&self.word(what)?)
    }

    fn prob(&mut self) -> Result<f64, Kind> {
        parse_prob(&self.word("a probability")?)
    }

    fn node(&mut self) -> Result<NodeRef, Kind> {
        let t = self.next("a node")?;
        if t.index.is_some() {
            return Err(Kind::BadNode(t.text()));
        }
        node_of(&t)
    }

    fn port(&mut self) -> Result<PortRef, Kind> {
        let t = self.next("a port")?;
        let Some(i) = &t.index else {
            return Err(Kind::BadPort(t.text()));
        };
        let port = match i.parse::<u8>() {
            Ok(p) if p < 255 => p,
            _ => return Err(Kind::BadPort(t.text())),
        };
        let node = node_of(&Token {
            tok: t.tok.clone(),
            index: None,
        })?;
        Ok(PortRef { node, port })
    }

    /// A node, then `off` to end what the verb starts (else it starts).
    fn node_on(&mut self) -> Result<(NodeRef, bool), Kind> {
        let node = self.node()?;
        let off = self.peek_word().as_deref() == Some("off");
        if off {
            self.toks.next();
        }
        Ok((node, !off))
    }

    fn peek_word(&self) -> Option<String> {
        self.toks
            .as_slice()
            .first()
            .and_then(|t| t.word())
            .map(str::to_string)
    }

    fn target(&mut self) -> Result<Target, Kind> {
        match self.peek_word().as_deref() {
            Some("link") => {
                self.toks.next();
                Ok(Target::Link(self.port()?))
            }
            Some("node") => {
                self.toks.next();
                Ok(Target::Node(self.node()?))
            }
            _ => Ok(Target::Fabric),
        }
    }

    fn end(mut self) -> Result<(), Kind> {
        match self.toks.next() {
            None => Ok(()),
            Some(t) => Err(Kind::Unexpected(t.text())),
        }
    }
}

fn parse_line(text: &str) -> Result<Option<(Nanos, Action)>, Kind> {
    let toks = tokenize(text)?;
    if toks.is_empty() {
        return Ok(None);
    }
    let mut l = Line {
        toks: toks.into_iter(),
    };
    let first = l.next("at")?;
    if first.word() != Some("at") {
        return Err(Kind::ExpectedAt(first.text()));
    }
    let at = l.time("a time")?;
    let verb = l.word("an action")?;
    let action = match verb.as_str() {
        "link-down" => Action::LinkDown(l.port()?),
        "link-up" => Action::LinkUp(l.port()?),
        "flap" => {
            let port = l.port()?;
            l.keyword("period")?;
            let period = l.time("a period")?;
            l.keyword("count")?;
            let c = l.word("a count")?;
            let count = c.parse::<u32>().map_err(|_| Kind::BadCount(c))?;
            let down = if l.peek_word().as_deref() == Some("down") {
                l.toks.next();
                Some(l.time("a down time")?)
            } else {
                None
            };
            if period == 0 || down.is_some_and(|d| d == 0 || d >= period) {
                return Err(Kind::BadFlap);
            }
            Action::Flap {
                port,
                period,
                count,
                down,
            }
        }
        "reboot" => {
            let node = l.node()?;
            let down = if l.peek_word().as_deref() == Some("down") {
                l.toks.next();
                l.time("a down time")?
            } else {
                0
            };
            Action::Reboot { node, down }
        }
        "remove" => Action::Remove(l.node()?),
        "unplug" => Action::Unplug(l.node()?),
        "plug" => Action::Plug(l.node()?),
        "reload" => {
            let t = l.next("a file")?;
            match (&t.tok, &t.index) {
                (Tok::Word(w) | Tok::Quoted(w), None) => Action::Reload(w.clone()),
                _ => {
                    return Err(Kind::Expected {
                        expected: "a file",
                        found: t.text(),
                    });
                }
            }
        }
        "join" => {
            let port = l.port()?;
            let w = l.word("an MGID")?;
            let mgid = mgid(&w).ok_or(Kind::BadMgid(w))?;
            let mut pkey = 0xffff;
            let mut send_only = false;
            while let Some(w) = l.peek_word() {
                l.toks.next();
                match w.as_str() {
                    "pkey" => {
                        let k = l.word("a P_Key")?;
                        pkey = number(&k)
                            .and_then(|n| u16::try_from(n).ok())
                            .ok_or(Kind::BadPKey(k))?;
                    }
                    "send-only" => send_only = true,
                    _ => return Err(Kind::Unexpected(w)),
                }
            }
            Action::Join {
                port,
                mgid,
                pkey,
                send_only,
            }
        }
        "leave" => {
            let port = l.port()?;
            let w = l.word("an MGID")?;
            Action::Leave {
                port,
                mgid: mgid(&w).ok_or(Kind::BadMgid(w))?,
            }
        }
        "service" => {
            let port = l.port()?;
            let w = l.word("a service ID")?;
            let id = number(&w).ok_or(Kind::BadServiceId(w))?;
            let lease = if l.peek_word().as_deref() == Some("lease") {
                l.toks.next();
                let w = l.word("a lease")?;
                Some(w.parse::<u32>().map_err(|_| Kind::BadCount(w))?)
            } else {
                None
            };
            Action::Service { port, id, lease }
        }
        "silent" => {
            let (node, on) = l.node_on()?;
            Action::Silent { node, on }
        }
        "slow" => Action::Slow {
            node: l.node()?,
            delay: l.time("a delay")?,
        },
        "stubborn" => {
            let (node, on) = l.node_on()?;
            Action::Stubborn { node, on }
        }
        "recable" => Action::Recable {
            from: l.port()?,
            to: l.port()?,
        },
        "clone-guid" => Action::CloneGuid {
            from: l.node()?,
            to: l.node()?,
        },
        "set-lft" => {
            let node = l.node()?;
            let w = l.word("a LID")?;
            let lid = w
                .parse::<u16>()
                .ok()
                .filter(|&l| l > 0 && l < 0xc000)
                .ok_or(Kind::BadCount(w))?;
            let w = l.word("a port")?;
            let port = w.parse::<u8>().map_err(|_| Kind::BadCount(w))?;
            Action::SetLft { node, lid, port }
        }
        "loss" => {
            let p = l.prob()?;
            Action::Fault {
                param: FaultParam::Loss(p),
                target: l.target()?,
            }
        }
        "duplicate" => {
            let p = l.prob()?;
            Action::Fault {
                param: FaultParam::Duplicate(p),
                target: l.target()?,
            }
        }
        "reorder" => {
            let p = l.prob()?;
            let j = l.time("a hold-back time")?;
            Action::Fault {
                param: FaultParam::Reorder(p, j),
                target: l.target()?,
            }
        }
        "delay" => {
            let d = l.time("a delay")?;
            Action::Fault {
                param: FaultParam::Delay(d),
                target: l.target()?,
            }
        }
        "clear-faults" => Action::ClearFaults(l.target()?),
        "start-sm" => {
            let port = l.port()?;
            let priority = if l.peek_word().as_deref() == Some("priority") {
                l.toks.next();
                let w = l.word("a priority")?;
                w.parse::<u8>()
                    .ok()
                    .filter(|p| *p <= 15)
                    .ok_or(Kind::BadPriority(w))?
            } else {
                0
            };
            let sm_key = if l.peek_word().as_deref() == Some("sm-key") {
                l.toks.next();
                let w = l.word("an SM_Key")?;
                Some(number(&w).ok_or(Kind::BadSmKey(w))?)
            } else {
                None
            };
            Action::StartSm {
                port,
                priority,
                sm_key,
            }
        }
        "stop-sm" => Action::StopSm(l.port()?),
        "probe" => {
            let from = l.port()?;
            let to = l.port()?;
            let w = l.word("an attribute")?;
            let attr = smp_attr(&w).ok_or(Kind::BadAttribute(w))?;
            let m_key = if l.peek_word().as_deref() == Some("m-key") {
                l.toks.next();
                let w = l.word("an M_Key")?;
                number(&w).ok_or(Kind::BadMKey(w))?
            } else {
                0
            };
            Action::Probe {
                from,
                to,
                attr,
                m_key,
            }
        }
        _ => return Err(Kind::UnknownAction(verb)),
    };
    l.end()?;
    Ok(Some((at, action)))
}

impl Scenario {
    /// Parses scenario text; `file` is the name errors carry.
    pub fn parse(file: &str, text: &str) -> Result<Scenario, ScenarioError> {
        let mut events = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let err = |kind| ScenarioError {
                file: file.to_string(),
                line: i + 1,
                kind,
            };
            if let Some((at, action)) = parse_line(line).map_err(err)? {
                events.push(Event {
                    line: i + 1,
                    at,
                    action,
                });
            }
        }
        Ok(Scenario {
            file: file.to_string(),
            events,
        })
    }

    /// The scenario as text, one line per event in order: [`Scenario::parse`] reads it
    /// back as the same events.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for e in &self.events {
            out.push_str(&format!("at {} {}\n", format_time(e.at), e.action));
        }
        out
    }

    /// Reads and parses a scenario file.
    pub fn read(path: &std::path::Path) -> Result<Scenario, ReadError> {
        let text = std::fs::read_to_string(path).map_err(|e| ReadError::Io {
            file: path.display().to_string(),
            message: e.to_string(),
        })?;
        Ok(Scenario::parse(&path.display().to_string(), &text)?)
    }
}

/// Why a scenario file could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    #[error("{file}: {message}")]
    Io { file: String, message: String },
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
}

/// A 64-bit number, `0x...` or decimal.
fn number(w: &str) -> Option<u64> {
    w.strip_prefix("0x")
        .map_or_else(|| w.parse().ok(), |h| u64::from_str_radix(h, 16).ok())
}

/// A multicast GID: up to 32 hex digits after `0x`.
fn mgid(w: &str) -> Option<u128> {
    let h = w.strip_prefix("0x")?;
    if h.is_empty() || h.len() > 32 || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u128::from_str_radix(h, 16).ok()
}

/// An SMP attribute by its name (any case, as `ibsm decode` names it) or number.
fn smp_attr(w: &str) -> Option<u16> {
    if let Some(n) = number(w) {
        return u16::try_from(n).ok();
    }
    (0..=0xffffu16).find(|&id| {
        sm_mad::attr::SmpAttrId::from_raw_value(id)
            .name()
            .is_some_and(|n| n.eq_ignore_ascii_case(w))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(line: &str) -> Result<Action, ScenarioErrorKind> {
        Scenario::parse("t", line)
            .map(|s| s.events.into_iter().next().map(|e| e.action))
            .map_err(|e| e.kind)
            .and_then(|a| a.ok_or(Kind::Missing("event")))
    }

    fn desc(s: &str) -> NodeRef {
        NodeRef::Desc(s.to_string())
    }

    #[test]
    fn times() {
        assert_eq!(parse_time("0"), Ok(0));
        assert_eq!(parse_time("250us"), Ok(250_000));
        assert_eq!(parse_time("10ms"), Ok(10_000_000));
        assert_eq!(parse_time("1.5ms"), Ok(1_500_000));
        assert_eq!(parse_time("2s"), Ok(2_000_000_000));
        assert_eq!(parse_time("7ns"), Ok(7));
        assert_eq!(parse_time("0.000000001s"), Ok(1));
        assert!(matches!(parse_time("1.0001ns"), Err(Kind::BadTime(_))));
        assert!(matches!(parse_time("1.ms"), Err(Kind::BadTime(_))));
        assert!(matches!(parse_time("10"), Err(Kind::BadTime(_))));
        assert!(matches!(parse_time("-1ms"), Err(Kind::BadTime(_))));
        assert!(matches!(
            parse_time("99999999999999999999s"),
            Err(Kind::TimeOverflow(_))
        ));
    }

    #[test]
    fn every_action() {
        let s = Scenario::parse(
            "s.txt",
            r#"
            # comment
            at 5ms link-down "leaf 3"[1]   # trailing comment
            at 6ms link-up 0x10[2]
            at 1ms flap 0x0002000100000004[2] period 100us count 5
            at 1ms flap "a"[1] period 100us count 2 down 10us
            at 20ms reboot "spine 0"
            at 20ms reboot "spine 1" down 1ms
            at 30ms remove "quote \" in"
            at 0 silent "leaf 1"
            at 0 silent "leaf 1" off
            at 0 slow "leaf 2" 5ms
            at 40ms recable "a"[1] "c"[2]
            at 0 loss 0.05
            at 0 loss 0.5 link "a"[1]
            at 0 duplicate 0.1 node 0xabc
            at 0 reorder 0.2 3us
            at 0 delay 1us link 0x1[1]
            at 1s clear-faults
            at 1s clear-faults node "x"
            at 0 start-sm "host 1"[1] priority 9
            at 2s stop-sm "host 1"[1]
            at 3s start-sm 0x5[0]
            at 4s remove 0002:0001:0000:0004
            "#,
        )
        .unwrap();
        assert_eq!(s.events.len(), 22);
        assert_eq!(
            s.events[21].action,
            Action::Remove(NodeRef::Guid(Guid(0x0002_0001_0000_0004)))
        );
        let host = PortRef {
            node: desc("host 1"),
            port: 1,
        };
        assert_eq!(
            s.events[18].action,
            Action::StartSm {
                port: host.clone(),
                priority: 9,
                sm_key: None,
            }
        );
        assert_eq!(s.events[19].action, Action::StopSm(host));
        assert_eq!(
            s.events[20].action,
            Action::StartSm {
                port: PortRef {
                    node: NodeRef::Guid(Guid(5)),
                    port: 0
                },
                priority: 0,
                sm_key: None,
            }
        );
        assert_eq!(s.events[0].line, 3);
        assert_eq!(s.events[0].at, 5_000_000);
        assert_eq!(
            s.events[0].action,
            Action::LinkDown(PortRef {
                node: desc("leaf 3"),
                port: 1
            })
        );
        assert_eq!(
            s.events[2].action,
            Action::Flap {
                port: PortRef {
                    node: NodeRef::Guid(Guid(0x0002_0001_0000_0004)),
                    port: 2
                },
                period: 100_000,
                count: 5,
                down: None
            }
        );
        assert_eq!(s.events[6].action, Action::Remove(desc("quote \" in")));
        assert_eq!(
            s.events[8].action,
            Action::Silent {
                node: desc("leaf 1"),
                on: false
            }
        );
        assert_eq!(
            s.events[13].action,
            Action::Fault {
                target: Target::Node(NodeRef::Guid(Guid(0xabc))),
                param: FaultParam::Duplicate(0.1)
            }
        );
        assert_eq!(
            s.events[14].action,
            Action::Fault {
                target: Target::Fabric,
                param: FaultParam::Reorder(0.2, 3_000)
            }
        );
    }

    #[test]
    fn hot_plug_reload_and_sa_clients() {
        let host = PortRef {
            node: desc("h"),
            port: 1,
        };
        assert_eq!(one("at 0 unplug \"s\""), Ok(Action::Unplug(desc("s"))));
        assert_eq!(
            one("at 1s plug 0x5"),
            Ok(Action::Plug(NodeRef::Guid(Guid(5))))
        );
        assert_eq!(
            one("at 1s reload \"b c.toml\""),
            Ok(Action::Reload("b c.toml".into()))
        );
        assert_eq!(
            one("at 1s reload b.toml"),
            Ok(Action::Reload("b.toml".into()))
        );
        assert_eq!(
            one("at 0 join \"h\"[1] 0xff12a01bffff00000000000000000001 pkey 0x8001 send-only"),
            Ok(Action::Join {
                port: host.clone(),
                mgid: 0xff12_a01b_ffff_0000_0000_0000_0000_0001,
                pkey: 0x8001,
                send_only: true,
            })
        );
        assert_eq!(
            one("at 0 join \"h\"[1] 0xff"),
            Ok(Action::Join {
                port: host.clone(),
                mgid: 0xff,
                pkey: 0xffff,
                send_only: false,
            })
        );
        assert_eq!(
            one("at 0 leave \"h\"[1] 0x1"),
            Ok(Action::Leave {
                port: host.clone(),
                mgid: 1
            })
        );
        assert_eq!(
            one("at 0 service \"h\"[1] 0x10 lease 30"),
            Ok(Action::Service {
                port: host.clone(),
                id: 0x10,
                lease: Some(30)
            })
        );
        assert_eq!(
            one("at 0 service \"h\"[1] 7"),
            Ok(Action::Service {
                port: host,
                id: 7,
                lease: None
            })
        );
        assert_eq!(
            one("at 0 join \"h\"[1] ff12"),
            Err(Kind::BadMgid("ff12".into()))
        );
        assert_eq!(
            one("at 0 join \"h\"[1] 0x+1"),
            Err(Kind::BadMgid("0x+1".into()))
        );
        assert_eq!(
            one("at 0 join \"h\"[1] 0x1 pkey 0x10000"),
            Err(Kind::BadPKey("0x10000".into()))
        );
        assert_eq!(
            one("at 0 service \"h\"[1] x"),
            Err(Kind::BadServiceId("x".into()))
        );
        assert_eq!(
            one("at 0 reload \"a\"[1]"),
            Err(Kind::Expected {
                expected: "a file",
                found: "\"a\"[1]".into()
            })
        );
    }

    #[test]
    fn clone_guid_names_two_nodes() {
        assert_eq!(
            one("at 0 clone-guid \"host 1\" 0x5"),
            Ok(Action::CloneGuid {
                from: desc("host 1"),
                to: NodeRef::Guid(Guid(5)),
            })
        );
        assert_eq!(
            one("at 0 clone-guid \"host 1\""),
            Err(Kind::Missing("a node"))
        );
        assert_eq!(
            one("at 0 clone-guid \"a\"[1] \"b\""),
            Err(Kind::BadNode("\"a\"[1]".into()))
        );
    }

    #[test]
    fn written_scenarios_read_back_the_same() {
        let text = r#"
            at 5ms link-down "leaf 3"[1]
            at 6ms link-up 0x10[2]
            at 1ms flap 0x0002000100000004[2] period 100us count 5
            at 1ms flap "a"[1] period 100us count 2 down 10us
            at 20ms reboot "spine 0"
            at 20ms reboot "spine 1" down 1ms
            at 30ms remove "quote \" in"
            at 0 silent "leaf 1"
            at 0 silent "leaf 1" off
            at 0 slow "leaf 2" 5ms
            at 0 stubborn "leaf 2"
            at 0 stubborn "leaf 2" off
            at 40ms recable "a"[1] "c"[2]
            at 0 loss 0.05
            at 0 loss 0.5 link "a"[1]
            at 0 duplicate 0.1 node 0xabc
            at 0 reorder 0.2 3us
            at 0 delay 1us link 0x1[1]
            at 1.5s clear-faults
            at 1s clear-faults node "x"
            at 0 start-sm "host 1"[1] priority 9
            at 0 start-sm "host 1"[1] priority 9 sm-key 0xbad
            at 2s stop-sm "host 1"[1]
            at 3s probe "a"[1] "b"[1] PortInfo m-key 0x5
            at 4s unplug 0x7
            at 5s plug 0x7
            at 6s reload "next.toml"
            at 7s join "h"[1] 0xff12a01bffff00000000000000000001 pkey 0x8001 send-only
            at 7s join "h"[1] 0xff
            at 8s leave "h"[1] 0xff
            at 9s service "h"[1] 0x10 lease 30
            at 9s service "h"[1] 0x11
            at 123457ns link-down 0x10[2]
            at 10s clone-guid "host 1" 0x5
            at 11s set-lft "leaf 0" 17 255
            "#;
        let a = Scenario::parse("a", text).unwrap();
        let b = Scenario::parse("b", &a.to_text()).unwrap();
        assert_eq!(a.events.len(), 35);
        for (x, y) in a.events.iter().zip(&b.events) {
            assert_eq!((x.at, &x.action), (y.at, &y.action), "{}", a.to_text());
        }
        assert_eq!(a.events.len(), b.events.len());
    }

    #[test]
    fn start_sm_takes_an_sm_key() {
        let port = PortRef {
            node: desc("h"),
            port: 1,
        };
        assert_eq!(
            one("at 0 start-sm \"h\"[1] priority 15 sm-key 0xbad"),
            Ok(Action::StartSm {
                port: port.clone(),
                priority: 15,
                sm_key: Some(0xbad),
            })
        );
        assert_eq!(
            one("at 0 start-sm \"h\"[1] sm-key 7"),
            Ok(Action::StartSm {
                port,
                priority: 0,
                sm_key: Some(7),
            })
        );
        assert_eq!(
            one("at 0 start-sm \"h\"[1] sm-key nope"),
            Err(Kind::BadSmKey("nope".into()))
        );
    }

    #[test]
    fn probe_names_two_ports_an_attribute_and_maybe_a_key() {
        let port = |n: &str| PortRef {
            node: desc(n),
            port: 1,
        };
        assert_eq!(
            one("at 0 probe \"a\"[1] \"b\"[1] portinfo m-key 0x5"),
            Ok(Action::Probe {
                from: port("a"),
                to: port("b"),
                attr: 0x15,
                m_key: 5,
            })
        );
        assert_eq!(
            one("at 0 probe \"a\"[1] \"b\"[1] SMInfo"),
            Ok(Action::Probe {
                from: port("a"),
                to: port("b"),
                attr: 0x20,
                m_key: 0,
            })
        );
        assert_eq!(
            one("at 0 probe \"a\"[1] \"b\"[1] 0x0011")
                .map(|a| matches!(a, Action::Probe { attr: 0x11, .. })),
            Ok(true)
        );
        assert_eq!(
            one("at 0 probe \"a\"[1] \"b\"[1] Colour"),
            Err(Kind::BadAttribute("Colour".into()))
        );
        assert_eq!(
            one("at 0 probe \"a\"[1] \"b\"[1] PortInfo m-key zz"),
            Err(Kind::BadMKey("zz".into()))
        );
    }

    #[test]
    fn errors_name_file_line_and_fault() {
        let e = Scenario::parse("f.scn", "at 0 loss 0.1\n\nat 5 link-down \"a\"[1]").unwrap_err();
        assert_eq!((e.file.as_str(), e.line), ("f.scn", 3));
        assert_eq!(e.kind, Kind::BadTime("5".into()));
        assert_eq!(
            e.to_string(),
            "f.scn:3: bad time \"5\" (expected 0 or a number with ns, us, ms or s)"
        );
        assert_eq!(
            one("at 0 loss 1.5"),
            Err(Kind::BadProbability("1.5".into()))
        );
        assert_eq!(
            one("at 0 loss NaN"),
            Err(Kind::BadProbability("NaN".into()))
        );
        assert_eq!(
            one("at 0 explode"),
            Err(Kind::UnknownAction("explode".into()))
        );
        assert_eq!(one("in 0 loss 0"), Err(Kind::ExpectedAt("in".into())));
        assert_eq!(
            one("at 0 link-down \"a\""),
            Err(Kind::BadPort("\"a\"".into()))
        );
        assert_eq!(
            one("at 0 link-down \"a\"[256]"),
            Err(Kind::BadPort("\"a\"[256]".into()))
        );
        assert_eq!(
            one("at 0 link-down \"a\"[1"),
            Err(Kind::BadPort("\"a\"[1".into()))
        );
        assert_eq!(one("at 0 remove \"a"), Err(Kind::Unterminated));
        assert_eq!(one("at 0 remove leaf"), Err(Kind::BadNode("leaf".into())));
        // A bare number is not taken for a GUID.
        assert_eq!(one("at 0 remove 12"), Err(Kind::BadNode("12".into())));
        assert_eq!(one("at 0 remove 0x"), Err(Kind::BadNode("0x".into())));
        assert_eq!(one("at 0 remove 0x+1"), Err(Kind::BadNode("0x+1".into())));
        assert_eq!(
            one("at 0 remove 0x10000000000000000"),
            Err(Kind::BadNode("0x10000000000000000".into()))
        );
        assert_eq!(one("at 0 remove"), Err(Kind::Missing("a node")));
        assert_eq!(
            one("at 0 remove 0x1 now"),
            Err(Kind::Unexpected("now".into()))
        );
        assert_eq!(
            one("at 0 flap 0x1[1] count 3"),
            Err(Kind::Expected {
                expected: "period",
                found: "count".into()
            })
        );
        assert_eq!(
            one("at 0 flap 0x1[1] period 1us count 3 down 1us"),
            Err(Kind::BadFlap)
        );
        assert_eq!(
            one("at 0 flap 0x1[1] period 1us count x"),
            Err(Kind::BadCount("x".into()))
        );
        assert_eq!(one("at 0 remove [3]"), Err(Kind::Unexpected("[".into())));
        assert_eq!(
            one("at 0 start-sm 0x1[1] priority 16"),
            Err(Kind::BadPriority("16".into()))
        );
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,200}") {
            let _ = Scenario::parse("p", &s);
        }

        #[test]
        fn never_panics_on_near_misses(
            words in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::strategy::Just("at".to_string()),
                    proptest::strategy::Just("flap".to_string()),
                    proptest::strategy::Just("period".to_string()),
                    proptest::strategy::Just("count".to_string()),
                    proptest::strategy::Just("down".to_string()),
                    proptest::strategy::Just("link".to_string()),
                    proptest::strategy::Just("node".to_string()),
                    proptest::strategy::Just("loss".to_string()),
                    proptest::strategy::Just("reorder".to_string()),
                    proptest::strategy::Just("recable".to_string()),
                    "[0-9]{1,22}(\\.[0-9]{0,12})?(ns|us|ms|s)?",
                    "0x[0-9a-f]{0,20}(\\[[0-9]{0,4}\\]?)?",
                    "\"[a-z \\\\\"]{0,6}\"?(\\[[0-9]{0,4}\\]?)?",
                    "[#\\[\\]\"\\\\]",
                ],
                0..12,
            )
        ) {
            let line = words.join(" ");
            let _ = Scenario::parse("p", &line);
        }

        #[test]
        fn times_round_trip(ns in 0u64..u64::MAX / 1_000) {
            proptest::prop_assert_eq!(parse_time(&format!("{ns}ns")), Ok(ns));
            proptest::prop_assert_eq!(parse_time(&format!("{}.{:03}us", ns / 1000, ns % 1000)), Ok(ns));
        }
    }
}
