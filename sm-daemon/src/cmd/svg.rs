//! The link-load heat map: the fabric drawn as SVG (written by hand), every link coloured
//! from cool to hot by its all-to-all load.
//!
//! Layout. Switches are ranked by breadth-first distance from the switches CAs hang off
//! (rank 0). When that gives at least two ranks and nearly every link joins two adjacent
//! ranks (trees: leaves, spines, cores), switches are drawn in rows by rank, rank 0 at the
//! bottom, each row ordered by the mean position of its neighbours in the row below, and the
//! CAs on a row under the leaves. Otherwise (tori, meshes, dragonflies, random graphs) the
//! switches fill a near-square grid in snapshot order and links longer than one cell bow out
//! as curves. Both layouts depend on nothing but the fabric.
//!
//! Load. A cable carries two directions; it is drawn in the colour of the busier one (its
//! tooltip gives both). Parallel cables between two switches are one line, thicker, in the
//! colour of the busiest. Idle links are grey. One scale covers switch and CA links; it runs
//! to twice the mean load of the links in use (or the busiest, if higher), so a perfectly
//! balanced fabric is drawn mid-scale and only a hot spot is red; the legend marks the mean.
//!
//! Size. Too many CAs to tell apart (more than a few pixels each) are drawn as one block per
//! switch in the colour of its busiest CA link; beyond [`MAX_DRAWN_LINKS`] pairs of linked
//! switches, links are not drawn, every switch takes the colour of the busiest link at it and
//! long rows wrap.
//! The picture says so in its caption.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use sm_routing::{Metrics, SwIdx, Topo};

/// Above this many lines (pairs of linked switches) the picture draws switches only.
const MAX_DRAWN_LINKS: usize = 20_000;
/// CAs are drawn one by one when each gets at least this many pixels of width.
const MIN_CA_PITCH: f64 = 4.0;
/// Switches per line when rows wrap (links not drawn).
const WRAP: usize = 96;
const MARGIN: f64 = 20.0;
/// Room on the left for row labels.
const LABEL_W: f64 = 90.0;
const HEADER_H: f64 = 70.0;
const LEGEND_H: f64 = 70.0;

/// The picture, and what it leaves out or aggregates.
pub(crate) struct Picture {
    pub(crate) svg: String,
    pub(crate) note: Option<String>,
}

/// Colour stops, cool to hot (dark enough to read on white).
const STOPS: [(f64, [u8; 3]); 5] = [
    (0.0, [0x21, 0x66, 0xac]),
    (0.3, [0x1a, 0x98, 0x50]),
    (0.55, [0xd4, 0xb0, 0x00]),
    (0.78, [0xf4, 0x6d, 0x43]),
    (1.0, [0xb2, 0x18, 0x2b]),
];
const IDLE: &str = "#c8c8c8";

/// The colour of `load` on a scale up to `max`.
fn colour(load: u64, max: u64) -> String {
    if load == 0 || max == 0 {
        return IDLE.to_string();
    }
    let t = (load as f64 / max as f64).clamp(0.0, 1.0);
    let mut rgb = STOPS[STOPS.len() - 1].1;
    for w in STOPS.windows(2) {
        let ((a, ca), (b, cb)) = (w[0], w[1]);
        if t <= b {
            let f = if b > a { (t - a) / (b - a) } else { 0.0 };
            for i in 0..3 {
                rgb[i] = (ca[i] as f64 + (cb[i] as f64 - ca[i] as f64) * f).round() as u8;
            }
            break;
        }
    }
    format!("#{:02x}{:02x}{:02x}", rgb[0], rgb[1], rgb[2])
}

/// Text for SVG content and attribute values.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if (c as u32) < 0x20 && c != '\t' && c != '\n' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// Both directions of one cable: ends (switch, port) a and b, flows a -> b and b -> a.
type Cable = (SwIdx, u8, SwIdx, u8, u64, u64);

/// One or more cables between two switches.
#[derive(Debug, Default, Clone)]
struct Edge {
    cables: usize,
    /// The busiest direction of any of them.
    max: u64,
    /// Both directions of the first cable: (a -> b, b -> a) and its ports.
    first: (u8, u8, u64, u64),
}

/// The CAs hanging off one switch.
#[derive(Debug, Default, Clone)]
struct CaGroup {
    /// Loads of their links, in port GUID order.
    loads: Vec<u64>,
    max: u64,
}

struct Model<'a, 't> {
    topo: &'a Topo<'t>,
    edges: BTreeMap<(u32, u32), Edge>,
    cas: Vec<CaGroup>,
    /// Busiest link (either direction) at each switch.
    sw_max: Vec<u64>,
    /// Top of the colour scale: the busiest link, or twice the mean if that is higher.
    max: u64,
    /// Mean load of the links in use.
    mean: u64,
    rank: Vec<u32>,
}

impl<'a, 't> Model<'a, 't> {
    fn new(topo: &'a Topo<'t>, m: &Metrics) -> Model<'a, 't> {
        let n = topo.num_switches();
        let mut edges: BTreeMap<(u32, u32), Edge> = BTreeMap::new();
        let mut sw_max = vec![0u64; n];
        // Directions of each cable, keyed by its lower end (switch, port).
        let mut dirs: BTreeMap<(u32, u8), Cable> = BTreeMap::new();
        for l in &m.all_to_all.per_link {
            sw_max[l.from.idx()] = sw_max[l.from.idx()].max(l.flows);
            sw_max[l.to.idx()] = sw_max[l.to.idx()].max(l.flows);
            if l.from == l.to {
                continue;
            }
            if (l.from.0, l.port) < (l.to.0, l.to_port) {
                let e = dirs
                    .entry((l.from.0, l.port))
                    .or_insert((l.from, l.port, l.to, l.to_port, 0, 0));
                e.4 = l.flows;
            } else {
                let e = dirs
                    .entry((l.to.0, l.to_port))
                    .or_insert((l.to, l.to_port, l.from, l.port, 0, 0));
                e.5 = l.flows;
            }
        }
        for (a, pa, b, pb, ab, ba) in dirs.into_values() {
            let e = edges.entry((a.0, b.0)).or_default();
            if e.cables == 0 {
                e.first = (pa, pb, ab, ba);
            }
            e.cables += 1;
            e.max = e.max.max(ab).max(ba);
        }
        let mut cas = vec![CaGroup::default(); n];
        for c in &m.all_to_all.per_ca {
            if let Some(g) = cas.get_mut(c.sw.idx()) {
                g.loads.push(c.flows);
                g.max = g.max.max(c.flows);
            }
        }
        let max = edges
            .values()
            .map(|e| e.max)
            .chain(cas.iter().map(|g| g.max))
            .max()
            .unwrap_or(0);
        // Multi-source breadth-first search from the switches with CAs.
        let mut rank = vec![u32::MAX; n];
        let mut queue: Vec<SwIdx> = Vec::new();
        for (s, g) in cas.iter().enumerate() {
            if !g.loads.is_empty() {
                rank[s] = 0;
                queue.push(SwIdx(s as u32));
            }
        }
        let mut head = 0;
        while let Some(&s) = queue.get(head) {
            head += 1;
            for a in topo.adj(s) {
                if rank[a.peer.idx()] == u32::MAX {
                    rank[a.peer.idx()] = rank[s.idx()] + 1;
                    queue.push(a.peer);
                }
            }
        }
        let used: Vec<u64> = edges
            .values()
            .map(|e| e.max)
            .chain(cas.iter().flat_map(|g| g.loads.iter().copied()))
            .filter(|&l| l > 0)
            .collect();
        let mean = if used.is_empty() {
            0
        } else {
            (used.iter().sum::<u64>() as f64 / used.len() as f64).round() as u64
        };
        Model {
            topo,
            edges,
            cas,
            sw_max,
            max: max.max(2 * mean),
            mean,
            rank,
        }
    }

    fn desc(&self, s: u32) -> String {
        let node = self.topo.fabric.node(self.topo.switches[s as usize]);
        format!("{} ({})", node.description, node.guid)
    }

    /// Rows by rank fit when there are two ranks or more and at most a tenth of the cables
    /// join switches of one rank or ranks further apart.
    fn layered(&self) -> bool {
        let ranked: Vec<u32> = self
            .rank
            .iter()
            .copied()
            .filter(|&r| r != u32::MAX)
            .collect();
        let top = ranked.iter().copied().max().unwrap_or(0);
        if top == 0 || self.edges.is_empty() {
            return false;
        }
        let skew = self
            .edges
            .keys()
            .filter(|(a, b)| {
                let (ra, rb) = (self.rank[*a as usize], self.rank[*b as usize]);
                ra == u32::MAX || rb == u32::MAX || ra.abs_diff(rb) != 1
            })
            .count();
        skew * 10 <= self.edges.len()
    }
}

/// Where everything goes.
struct Layout {
    width: f64,
    height: f64,
    /// Centre of each switch.
    pos: Vec<(f64, f64)>,
    /// Switch box size.
    box_w: f64,
    box_h: f64,
    /// Row labels: (y, text).
    rows: Vec<(f64, String)>,
    /// Individual CAs: (switch, x, y, load), when drawn one by one.
    cas: Vec<(u32, f64, f64, u64)>,
    /// Aggregated CA blocks under switches: (switch, y offset below the centre, height).
    ca_block: Option<(f64, f64)>,
    /// Curved links (grid layout).
    curved: bool,
    labels: bool,
    /// Distance between neighbouring grid cells (grid layout).
    pitch: f64,
}

fn layered_layout(md: &Model<'_, '_>, wrap: bool) -> Layout {
    let n = md.rank.len();
    let top_rank = md
        .rank
        .iter()
        .copied()
        .filter(|&r| r != u32::MAX)
        .max()
        .unwrap_or(0);
    let unranked = md.rank.contains(&u32::MAX);
    let levels = top_rank as usize + 1 + unranked as usize;
    let mut rows: Vec<Vec<u32>> = vec![Vec::new(); levels];
    for s in 0..n as u32 {
        let r = md.rank[s as usize];
        let level = if r == u32::MAX {
            levels - 1
        } else {
            r as usize
        };
        rows[level].push(s);
    }
    // Order each row by the mean position of its neighbours in the row below.
    let mut frac = vec![f64::NAN; n];
    for (level, row) in rows.iter_mut().enumerate() {
        if level > 0 {
            let mut keyed: Vec<(f64, u32)> = row
                .iter()
                .map(|&s| {
                    let below: Vec<f64> = md
                        .topo
                        .adj(SwIdx(s))
                        .iter()
                        .map(|a| frac[a.peer.idx()])
                        .filter(|f| !f.is_nan())
                        .collect();
                    let b = if below.is_empty() {
                        f64::INFINITY
                    } else {
                        below.iter().sum::<f64>() / below.len() as f64
                    };
                    (b, s)
                })
                .collect();
            keyed.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
            *row = keyed.into_iter().map(|(_, s)| s).collect();
        }
        let k = row.len() as f64;
        for (i, &s) in row.iter().enumerate() {
            frac[s as usize] = (i as f64 + 0.5) / k;
        }
    }
    // Without links to draw, long rows wrap into lines of at most WRAP switches.
    let per_line = |len: usize| if wrap { len.min(WRAP) } else { len }.max(1);
    let widest = rows.iter().map(|r| per_line(r.len())).max().unwrap_or(1) as f64;
    let pitch = (1600.0 / widest).clamp(10.0, 90.0);
    let total_cas: usize = md.cas.iter().map(|g| g.loads.len()).sum();
    let mut content = widest * pitch;
    let ca_pitch_wanted = 12.0;
    if total_cas > 0 && (total_cas as f64) * ca_pitch_wanted <= 1600.0_f64.max(content) {
        content = content.max(total_cas as f64 * ca_pitch_wanted);
    }
    let ca_pitch = if total_cas > 0 {
        content / total_cas as f64
    } else {
        0.0
    };
    let one_by_one = !wrap && total_cas > 0 && ca_pitch >= MIN_CA_PITCH;
    // Wide pictures get taller rows, so links between rows stay apart.
    let row_gap = if wrap {
        60.0
    } else {
        (content * 0.12).clamp(130.0, 400.0)
    };
    let box_w = (pitch * 0.7).min(70.0);
    let box_h = (pitch * 0.45).clamp(6.0, 22.0);
    let line_gap = 2.0 * box_h + 8.0;
    let left = MARGIN + LABEL_W;
    let top = HEADER_H;
    let mut pos = vec![(0.0, 0.0); n];
    let mut labels = Vec::new();
    // Highest rank on top.
    let mut y = top + 20.0;
    for (level, row) in rows.iter().enumerate().rev() {
        let width = per_line(row.len());
        let lines = row.len().div_ceil(width).max(1);
        let step = content / width as f64;
        for (i, &s) in row.iter().enumerate() {
            let (col, line) = (i % width, i / width);
            pos[s as usize] = (left + (col as f64 + 0.5) * step, y + line as f64 * line_gap);
        }
        let name = if unranked && level == levels - 1 {
            "no CA reachable".to_string()
        } else if level == 0 {
            "rank 0 (leaves)".to_string()
        } else {
            format!("rank {level}")
        };
        labels.push((y, name));
        y += (lines - 1) as f64 * line_gap + row_gap;
    }
    let mut cas = Vec::new();
    let mut ca_block = None;
    if one_by_one {
        let mut i = 0usize;
        for &s in &rows[0] {
            for &load in &md.cas[s as usize].loads {
                cas.push((s, left + (i as f64 + 0.5) * ca_pitch, y, load));
                i += 1;
            }
        }
        labels.push((y, "CAs".into()));
        y += row_gap;
    } else if total_cas > 0 {
        ca_block = Some((box_h / 2.0 + 4.0, (box_h * 0.6).max(5.0)));
    }
    let rows_h = y - row_gap + 2.0 * box_h + 50.0;
    Layout {
        width: left + content + MARGIN,
        height: rows_h + LEGEND_H,
        pos,
        box_w,
        box_h,
        rows: labels,
        cas,
        ca_block,
        curved: false,
        labels: pitch >= 50.0,
        pitch,
    }
}

/// Grid coordinates from the switches' descriptions, when every one ends in two or three
/// comma-separated integers, the same number for all (`switch 2,0,1`, as generated tori and
/// meshes are named): a third coordinate sets planes side by side. `None` when they do not, or two switches
/// would share a cell.
fn coordinates(md: &Model<'_, '_>) -> Option<Vec<(usize, usize)>> {
    let topo = md.topo;
    let mut coords: Vec<Vec<usize>> = Vec::with_capacity(topo.num_switches());
    for &n in &topo.switches {
        let desc = &topo.fabric.node(n).description;
        let last = desc.split_whitespace().next_back()?;
        let c: Vec<usize> = last
            .split(',')
            .map(|x| x.parse::<usize>().ok())
            .collect::<Option<_>>()?;
        if !(2..=3).contains(&c.len()) || coords.first().is_some_and(|f| f.len() != c.len()) {
            return None;
        }
        if c.iter().any(|&x| x > 4096) {
            return None;
        }
        coords.push(c);
    }
    let dims = coords.first()?.len();
    let extent = |d: usize| coords.iter().map(|c| c[d]).max().unwrap_or(0) + 1;
    let cells: Vec<(usize, usize)> = coords
        .iter()
        .map(|c| match dims {
            2 => (c[0], c[1]),
            _ => (c[0] + c[2] * (extent(0) + 1), c[1]),
        })
        .collect();
    let mut seen: Vec<&(usize, usize)> = cells.iter().collect();
    seen.sort_unstable();
    if seen.windows(2).any(|w| w[0] == w[1]) {
        return None;
    }
    Some(cells)
}

fn grid_layout(md: &Model<'_, '_>) -> Layout {
    let n = md.rank.len();
    let cells = coordinates(md).unwrap_or_else(|| {
        let cols = (n as f64).sqrt().ceil().max(1.0) as usize;
        (0..n).map(|i| (i % cols, i / cols)).collect()
    });
    let cols = cells.iter().map(|c| c.0).max().unwrap_or(0) + 1;
    let rows = cells.iter().map(|c| c.1).max().unwrap_or(0) + 1;
    let pitch = (1400.0 / cols as f64).clamp(14.0, 110.0);
    let left = MARGIN + 40.0;
    let top = HEADER_H;
    let pos = cells
        .iter()
        .map(|&(c, r)| {
            (
                left + (c as f64 + 0.5) * pitch,
                top + 20.0 + (r as f64 + 0.5) * pitch,
            )
        })
        .collect();
    let box_w = pitch * 0.5;
    let box_h = pitch * 0.3;
    let any_cas = md.cas.iter().any(|g| !g.loads.is_empty());
    Layout {
        width: left + cols as f64 * pitch + MARGIN + 40.0,
        // Curves bow out of the grid by up to half a cell.
        height: top + 40.0 + (rows as f64 + 0.6) * pitch + LEGEND_H,
        pos,
        box_w,
        box_h,
        rows: Vec::new(),
        cas: Vec::new(),
        ca_block: any_cas.then_some((box_h / 2.0 + 2.0, (pitch * 0.1).max(3.0))),
        curved: true,
        labels: pitch >= 70.0,
        pitch,
    }
}

fn f1(x: f64) -> String {
    format!("{:.1}", x)
}

/// Draws the heat map of `m`'s all-to-all loads on `topo`.
pub(crate) fn heat_map(topo: &Topo<'_>, m: &Metrics, title: &str) -> Picture {
    draw(topo, m, title, MAX_DRAWN_LINKS)
}

fn draw(topo: &Topo<'_>, m: &Metrics, title: &str, max_lines: usize) -> Picture {
    let md = Model::new(topo, m);
    let layered = md.layered();
    let switches_only = md.edges.len() > max_lines;
    let mut l = if layered {
        layered_layout(&md, switches_only)
    } else {
        grid_layout(&md)
    };
    let mut notes = Vec::new();
    if switches_only {
        notes.push(format!(
            "{} switch-to-switch cables: links not drawn, each switch coloured by the busiest \
             link at it, rows of more than {WRAP} switches wrapped",
            md.edges.values().map(|e| e.cables).sum::<usize>()
        ));
    }
    if l.ca_block.is_some() {
        notes
            .push("CAs drawn as one block per switch, coloured by its busiest CA link".to_string());
    }
    if !layered {
        notes.push(
            if coordinates(&md).is_some() {
                "grid layout (not a tree), switches at the coordinates their names give"
            } else {
                "grid layout (not a tree), switches in fabric order"
            }
            .to_string(),
        );
    }
    let note = (!notes.is_empty()).then(|| notes.join("; "));
    l.width = l.width.max(760.0);

    let mut s = String::with_capacity(256 + md.edges.len() * 160 + md.rank.len() * 160);
    let (w, h) = (l.width.ceil(), l.height.ceil());
    let _ = writeln!(s, r#"<?xml version="1.0" encoding="UTF-8"?>"#);
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(s, "<title>{}</title>", esc(title));
    let _ = writeln!(
        s,
        r##"<rect x="0" y="0" width="{w}" height="{h}" fill="#ffffff"/>"##
    );
    let _ = writeln!(
        s,
        r#"<text x="{MARGIN}" y="24" font-size="15" font-weight="bold">{}</text>"#,
        esc(title)
    );
    let a = &m.all_to_all;
    let summary = format!(
        "{} switches, {} CA ports; all-to-all flows per link: switch links max {} mean {:.1}, CA links max {}",
        topo.num_switches(),
        m.cas,
        a.switch_links.max,
        a.switch_links.mean,
        a.ca_links.max
    );
    let _ = writeln!(s, r#"<text x="{MARGIN}" y="42">{}</text>"#, esc(&summary));
    if let Some(n) = &note {
        let _ = writeln!(
            s,
            r##"<text x="{MARGIN}" y="58" fill="#555555">{}</text>"##,
            esc(n)
        );
    }
    for (y, name) in &l.rows {
        let _ = writeln!(
            s,
            r##"<text x="{MARGIN}" y="{}" fill="#555555">{}</text>"##,
            f1(y + 4.0),
            esc(name)
        );
    }

    // Links, idle and cool first so the hot ones are on top.
    if !switches_only {
        let mut order: Vec<(&(u32, u32), &Edge)> = md.edges.iter().collect();
        order.sort_by_key(|(k, e)| (e.max, **k));
        let many = md.edges.len() > 2000;
        let _ = writeln!(s, r#"<g id="links" stroke-linecap="round" fill="none">"#);
        for ((a, b), e) in order {
            let (pa, pb) = (l.pos[*a as usize], l.pos[*b as usize]);
            let width = if many { 0.8 } else { 1.4 } + (e.cables as f64 - 1.0).min(4.0) * 0.8;
            let (port_a, port_b, ab, ba) = e.first;
            let tip = if e.cables == 1 {
                format!(
                    "{} port {port_a} to {} port {port_b}: {ab} flows; back: {ba} flows",
                    md.desc(*a),
                    md.desc(*b)
                )
            } else {
                format!(
                    "{} to {}: {} cables, busiest direction {} flows",
                    md.desc(*a),
                    md.desc(*b),
                    e.cables,
                    e.max
                )
            };
            let stroke = colour(e.max, md.max);
            let dist = ((pa.0 - pb.0).powi(2) + (pa.1 - pb.1).powi(2)).sqrt();
            let grid_step = l.pitch;
            if l.curved && dist > grid_step * 1.01 {
                // Bow out perpendicular to the chord, more for longer links.
                let (mx, my) = ((pa.0 + pb.0) / 2.0, (pa.1 + pb.1) / 2.0);
                let (dx, dy) = ((pb.0 - pa.0) / dist, (pb.1 - pa.1) / dist);
                let bow = (dist * 0.15).min(grid_step * 1.5);
                let (cx, cy) = (mx - dy * bow, my + dx * bow);
                let _ = writeln!(
                    s,
                    r#"<path d="M{} {} Q{} {} {} {}" stroke="{stroke}" stroke-width="{:.1}"><title>{}</title></path>"#,
                    f1(pa.0),
                    f1(pa.1),
                    f1(cx),
                    f1(cy),
                    f1(pb.0),
                    f1(pb.1),
                    width,
                    esc(&tip)
                );
            } else {
                let _ = writeln!(
                    s,
                    r#"<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{stroke}" stroke-width="{:.1}"><title>{}</title></line>"#,
                    f1(pa.0),
                    f1(pa.1),
                    f1(pb.0),
                    f1(pb.1),
                    width,
                    esc(&tip)
                );
            }
        }
        let _ = writeln!(s, "</g>");
    }

    // CAs one by one: a line up to the switch and a dot.
    if !l.cas.is_empty() {
        let r = 3.5;
        let _ = writeln!(s, r#"<g id="cas">"#);
        let mut cas = l.cas.clone();
        cas.sort_by_key(|c| c.3);
        for (sw, x, y, load) in cas {
            let (sx, sy) = l.pos[sw as usize];
            let c = colour(load, md.max);
            let _ = writeln!(
                s,
                r#"<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{c}" stroke-width="1.2"/><circle cx="{}" cy="{}" r="{r}" fill="{c}"><title>CA link from {}: {load} flows</title></circle>"#,
                f1(sx),
                f1(sy + l.box_h / 2.0),
                f1(x),
                f1(y - r),
                f1(x),
                f1(y),
                esc(&md.desc(sw))
            );
        }
        let _ = writeln!(s, "</g>");
    }

    // Switches.
    let _ = writeln!(
        s,
        r##"<g id="switches" stroke="#333333" stroke-width="0.6">"##
    );
    for (i, &(x, y)) in l.pos.iter().enumerate() {
        let fill = if switches_only {
            colour(md.sw_max[i], md.max)
        } else {
            "#f4f4f4".to_string()
        };
        let g = &md.cas[i];
        let rank = match md.rank[i] {
            u32::MAX => "no CA reachable".to_string(),
            r => format!("rank {r}"),
        };
        let tip = format!(
            "{}: {rank}, {} CA ports (busiest CA link {} flows), busiest switch link {} flows",
            md.desc(i as u32),
            g.loads.len(),
            g.max,
            md.sw_max[i]
        );
        let _ = writeln!(
            s,
            r#"<rect x="{}" y="{}" width="{}" height="{}" rx="2" fill="{fill}"><title>{}</title></rect>"#,
            f1(x - l.box_w / 2.0),
            f1(y - l.box_h / 2.0),
            f1(l.box_w),
            f1(l.box_h),
            esc(&tip)
        );
        if let Some((dy, bh)) = l.ca_block
            && !g.loads.is_empty()
        {
            let _ = writeln!(
                s,
                r#"<rect x="{}" y="{}" width="{}" height="{}" fill="{}" stroke="none"><title>{} CA ports on {}: busiest CA link {} flows</title></rect>"#,
                f1(x - l.box_w / 2.0),
                f1(y + dy),
                f1(l.box_w),
                f1(bh),
                colour(g.max, md.max),
                g.loads.len(),
                esc(&md.desc(i as u32)),
                g.max
            );
        }
        if l.labels {
            let node = topo.fabric.node(topo.switches[i]);
            let chars = ((l.box_w / 6.0) as usize).max(3);
            // The end of a long name tells switches apart ("switch 2,0,1", "leaf 17").
            let desc = node.description.trim();
            let tail = if desc.chars().count() > chars {
                desc.split_whitespace().next_back().unwrap_or(desc)
            } else {
                desc
            };
            let label: String = tail.chars().take(chars).collect();
            let _ = writeln!(
                s,
                r#"<text x="{}" y="{}" font-size="9" text-anchor="middle" stroke="none">{}</text>"#,
                f1(x),
                f1(y + 3.0),
                esc(&label)
            );
        }
    }
    let _ = writeln!(s, "</g>");

    // Legend: the gradient with its scale.
    let ly = l.height - LEGEND_H + 20.0;
    let lw = 300.0;
    let lx = MARGIN;
    let _ = writeln!(s, r#"<g id="legend">"#);
    let _ = writeln!(s, r#"<defs><linearGradient id="heat" x1="0" x2="1">"#);
    for (off, c) in STOPS {
        let _ = writeln!(
            s,
            r##"<stop offset="{off}" stop-color="#{:02x}{:02x}{:02x}"/>"##,
            c[0], c[1], c[2]
        );
    }
    let _ = writeln!(s, "</linearGradient></defs>");
    let _ = writeln!(
        s,
        r#"<text x="{lx}" y="{}">all-to-all flows per link (busier direction)</text>"#,
        f1(ly - 6.0)
    );
    let _ = writeln!(
        s,
        r##"<rect x="{lx}" y="{}" width="{lw}" height="12" fill="url(#heat)" stroke="#333333" stroke-width="0.5"/>"##,
        f1(ly)
    );
    for k in 0..=4 {
        let x = lx + lw * k as f64 / 4.0;
        let v = md.max as f64 * k as f64 / 4.0;
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle">{v:.0}</text>"#,
            f1(x),
            f1(ly + 26.0),
        );
    }
    if md.max > 0 && md.mean > 0 {
        let x = lx + lw * md.mean as f64 / md.max as f64;
        let _ = writeln!(
            s,
            r##"<rect x="{:.1}" y="{}" width="1.5" height="18" fill="#000000"/><text x="{x:.1}" y="{}" text-anchor="middle">mean {}</text>"##,
            x - 0.75,
            f1(ly - 3.0),
            f1(ly + 40.0),
            md.mean
        );
    }
    let _ = writeln!(
        s,
        r#"<rect x="{}" y="{}" width="24" height="12" fill="{IDLE}"/><text x="{}" y="{}">idle</text>"#,
        f1(lx + lw + 30.0),
        f1(ly),
        f1(lx + lw + 60.0),
        f1(ly + 10.0)
    );
    let _ = writeln!(s, "</g>");
    let _ = writeln!(s, "</svg>");
    Picture { svg: s, note }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_run_cool_to_hot() {
        assert_eq!(colour(0, 10), IDLE);
        assert_eq!(colour(5, 0), IDLE);
        assert_eq!(colour(10, 10), "#b2182b");
        assert_eq!(colour(1, 1_000_000), "#2166ac");
        assert_eq!(colour(20, 10), "#b2182b");
    }

    fn picture(spec: sm_core::GenSpec, max_lines: usize) -> Picture {
        let mut f = sm_core::generate(&spec).unwrap();
        sm_core::lid::LidStore::new().assign(&mut f, 0).unwrap();
        let topo = Topo::new(&f).unwrap();
        let routes = sm_routing::engine("minhop")
            .unwrap()
            .route(&topo, &sm_routing::Options::default())
            .unwrap();
        let m = sm_routing::metrics(&topo, &routes, &sm_routing::MetricsOptions::default());
        draw(&topo, &m, "t", max_lines)
    }

    #[test]
    fn trees_in_rows_with_every_link() {
        use sm_core::generate::{FatTree2, GenSpec};
        let p = picture(GenSpec::FatTree2(FatTree2::new(8)), MAX_DRAWN_LINKS);
        assert!(p.note.is_none(), "{:?}", p.note);
        // 4 spines x 8 leaves, and 32 CAs one by one.
        assert_eq!(p.svg.matches("<line ").count(), 32 + 32);
        assert!(p.svg.contains("rank 1") && p.svg.contains(">CAs<"));
        // Balanced: the scale runs to twice the mean load, so no link is at the hot end.
        assert!(!p.svg.contains(&format!("stroke=\"{}\"", colour(1, 1))));
        assert!(p.svg.contains(">mean "));
    }

    #[test]
    fn huge_fabrics_draw_switches_only() {
        use sm_core::generate::{FatTree2, GenSpec};
        let p = picture(GenSpec::FatTree2(FatTree2::new(8)), 4);
        let note = p.note.unwrap_or_default();
        assert!(note.contains("links not drawn"), "{note}");
        assert!(!p.svg.contains("<line "));
        assert!(!p.svg.contains("id=\"links\""));
        // The switches carry the colour instead: background, 12 switches, a CA block per
        // leaf, the legend's bar, idle sample and mean mark.
        assert_eq!(p.svg.matches("<rect x=").count(), 1 + 12 + 8 + 3);
    }

    #[test]
    fn grids_use_the_coordinates_in_names() {
        use sm_core::generate::{GenSpec, Grid};
        let p = picture(GenSpec::Torus(Grid::new(vec![3, 3, 2], 1)), MAX_DRAWN_LINKS);
        let note = p.note.unwrap_or_default();
        assert!(note.contains("coordinates"), "{note}");
        // Wraparound links bow out as curves.
        assert!(p.svg.contains("<path d=\"M"));
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(esc("a<b>&\"'\u{1}"), "a&lt;b&gt;&amp;&quot;&apos; ");
    }
}
