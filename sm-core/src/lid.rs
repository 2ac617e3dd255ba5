//! LID assignment and its persistence in OpenSM's `guid2lid` format.
//!
//! Every end port (switch port 0, CA and router ports) gets a range of 2^LMC LIDs aligned to
//! its size; switches always get one LID. Assignment is stable: a port keeps the range the
//! store remembers for its GUID, then the LID it already holds, and only then gets the lowest
//! free aligned range. Ranges of ports that left the fabric stay reserved, so a port that
//! comes back gets its old LIDs and nobody else's move; they are reclaimed only when the
//! unicast space would otherwise run out.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::fabric::{Fabric, NodeKind, PortIdx};
use sm_mad::{Guid, Lid};

/// Highest unicast LID.
pub const MAX_UNICAST: u16 = 0xBFFF;

/// A LID range: `base ..= base + 2^lmc - 1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub struct LidRange {
    pub base: Lid,
    pub lmc: u8,
}

impl LidRange {
    /// Number of LIDs in the range.
    pub const fn len(self) -> u16 {
        1 << self.lmc
    }
    /// Never empty; present for symmetry with `len`.
    pub const fn is_empty(self) -> bool {
        false
    }
    /// The last LID.
    pub const fn last(self) -> Lid {
        Lid(self.base.0 + self.len() - 1)
    }
    fn lids(self) -> std::ops::RangeInclusive<u16> {
        self.base.0..=self.last().0
    }
}

/// Why LIDs could not be assigned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LidError {
    #[error("unicast LID space exhausted: {needed} ports still need LIDs (LMC {lmc})")]
    Exhausted { needed: usize, lmc: u8 },
    #[error("LMC {0} is out of range 0..=7")]
    BadLmc(u8),
}

/// Why a `guid2lid` file was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}:{line}: {what}", file.display())]
pub struct LidFileError {
    pub file: PathBuf,
    pub line: usize,
    pub what: String,
}

/// What one assignment did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct AssignReport {
    /// Ports that kept the range the store remembered.
    pub kept: usize,
    /// Ports that kept the LID they already held (not remembered, but free).
    pub adopted: usize,
    /// Ports that got a fresh range.
    pub assigned: usize,
    /// Remembered ranges of absent ports that were given away to avoid exhaustion.
    pub reclaimed: usize,
}

/// The LID store: which GUID owns which range.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LidStore {
    by_guid: HashMap<Guid, LidRange>,
}

impl LidStore {
    /// An empty store.
    pub fn new() -> LidStore {
        LidStore::default()
    }

    /// The range remembered for a port GUID.
    pub fn get(&self, g: Guid) -> Option<LidRange> {
        self.by_guid.get(&g).copied()
    }

    /// Number of remembered ports.
    pub fn len(&self) -> usize {
        self.by_guid.len()
    }

    /// True when nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.by_guid.is_empty()
    }

    /// Assigns LIDs to every end port of `fabric` (writing `Port::lid` / `Port::lmc`) and
    /// remembers them. `lmc` applies to CA and router ports; switches get LMC 0.
    pub fn assign(&mut self, fabric: &mut Fabric, lmc: u8) -> Result<AssignReport, LidError> {
        self.assign_with(fabric, lmc, true)
    }

    /// [`LidStore::assign`]; with `adopt_held` false a port not remembered gets a fresh LID
    /// even when the one it holds is free (OpenSM's `reassign_lids`).
    pub fn assign_with(
        &mut self,
        fabric: &mut Fabric,
        lmc: u8,
        adopt_held: bool,
    ) -> Result<AssignReport, LidError> {
        if lmc > 7 {
            return Err(LidError::BadLmc(lmc));
        }
        let mut report = AssignReport::default();
        // A CA or router port without a link is unreachable: it gets no LID (as OpenSM
        // does), and keeps any remembered one reserved.
        let ports: Vec<PortIdx> = fabric
            .end_ports()
            .filter(|&p| {
                let port = fabric.port(p);
                port.remote.is_some() || fabric.node(port.node).kind == NodeKind::Switch
            })
            .collect();
        let present: HashMap<Guid, PortIdx> =
            ports.iter().map(|&p| (fabric.port(p).guid, p)).collect();
        let want = |fabric: &Fabric, p: PortIdx| -> u8 {
            if fabric.node(fabric.port(p).node).kind == NodeKind::Switch {
                0
            } else {
                lmc
            }
        };

        // used[lid]: taken by a present port or reserved for an absent one.
        let mut used = vec![false; MAX_UNICAST as usize + 1];
        let take = |used: &mut Vec<bool>, r: LidRange| {
            for l in r.lids() {
                used[l as usize] = true;
            }
        };
        let free = |used: &[bool], r: LidRange| {
            r.base.0 >= 1 && r.last().0 <= MAX_UNICAST && r.lids().all(|l| !used[l as usize])
        };

        // 1. Remembered ranges, for present ports first (resized if the LMC changed),
        //    then reserved for absent ones.
        let mut result: HashMap<PortIdx, LidRange> = HashMap::new();
        let mut remembered: Vec<(Guid, LidRange)> =
            self.by_guid.iter().map(|(g, r)| (*g, *r)).collect();
        remembered.sort_by_key(|(_, r)| r.base);
        for &(g, r) in &remembered {
            let Some(&p) = present.get(&g) else { continue };
            let want_lmc = want(fabric, p);
            let r = LidRange {
                base: r.base,
                lmc: want_lmc,
            };
            if r.base.0 % r.len() == 0 && free(&used, r) {
                take(&mut used, r);
                result.insert(p, r);
                report.kept += 1;
            }
        }
        let mut absent: Vec<(Guid, LidRange)> = Vec::new();
        for &(g, r) in &remembered {
            if present.contains_key(&g) {
                continue;
            }
            if free(&used, r) {
                take(&mut used, r);
                absent.push((g, r));
            }
        }

        // 2. LIDs the ports already hold.
        for &p in ports.iter().filter(|_| adopt_held) {
            if result.contains_key(&p) {
                continue;
            }
            let port = fabric.port(p);
            let r = LidRange {
                base: port.lid,
                lmc: want(fabric, p),
            };
            if port.lid.is_unicast() && r.base.0 % r.len() == 0 && free(&used, r) {
                take(&mut used, r);
                result.insert(p, r);
                report.adopted += 1;
            }
        }

        // 3. Fresh ranges, lowest first; reclaim absent ports' ranges only if needed.
        let mut cursor = [1u16; 8];
        let mut pending: Vec<PortIdx> = ports
            .iter()
            .copied()
            .filter(|p| !result.contains_key(p))
            .collect();
        let mut reclaimed = false;
        let mut i = 0;
        while i < pending.len() {
            let p = pending[i];
            let l = want(fabric, p);
            let size = 1u32 << l;
            let mut base = (cursor[l as usize] as u32).div_ceil(size) * size;
            let mut found = None;
            while base + size - 1 <= MAX_UNICAST as u32 {
                let r = LidRange {
                    base: Lid(base as u16),
                    lmc: l,
                };
                if free(&used, r) {
                    found = Some(r);
                    break;
                }
                base += size;
            }
            match found {
                Some(r) => {
                    cursor[l as usize] = r.last().0.saturating_add(1);
                    take(&mut used, r);
                    result.insert(p, r);
                    report.assigned += 1;
                    i += 1;
                }
                None if !reclaimed && !absent.is_empty() => {
                    reclaimed = true;
                    for (_, r) in absent.drain(..) {
                        for l in r.lids() {
                            used[l as usize] = false;
                        }
                        report.reclaimed += 1;
                    }
                    cursor = [1; 8];
                }
                None => {
                    pending.drain(..i);
                    return Err(LidError::Exhausted {
                        needed: pending.len(),
                        lmc,
                    });
                }
            }
        }

        // Commit: only now does anything change.
        for (&p, &r) in &result {
            let port = fabric.port_mut(p);
            port.lid = r.base;
            port.lmc = r.lmc;
            self.by_guid.insert(port.guid, r);
        }
        if reclaimed {
            let keep: std::collections::HashSet<Guid> = present.keys().copied().collect();
            self.by_guid.retain(|g, _| keep.contains(g));
        }
        Ok(report)
    }

    /// The store as OpenSM writes `guid2lid`: `0x<guid> 0x<first lid> 0x<last lid>`.
    pub fn to_guid2lid(&self) -> String {
        let mut v: Vec<(&Guid, &LidRange)> = self.by_guid.iter().collect();
        v.sort_by_key(|(_, r)| r.base);
        let mut s = String::new();
        for (g, r) in v {
            let _ = writeln!(
                s,
                "0x{:016x} 0x{:04x} 0x{:04x}\n",
                g.0,
                r.base.0,
                r.last().0
            );
        }
        s
    }

    /// Parses `guid2lid` text. Every malformed, misaligned or overlapping entry is an error
    /// naming its line: a store is never half-loaded.
    pub fn from_guid2lid(text: &str, file: &Path) -> Result<LidStore, LidFileError> {
        let (store, mut bad) = LidStore::read_guid2lid(text, file, true);
        match bad.pop() {
            Some(e) => Err(e),
            None => Ok(store),
        }
    }

    /// Reads a `guid2lid` file's text keeping what it can: a line that does not read, or
    /// claims a GUID or LID an earlier line has, is skipped and returned as an error (with
    /// its line), the rest kept. An SM must start with the LIDs it can trust rather than
    /// refuse to start over one bad line.
    pub fn from_guid2lid_lenient(text: &str, file: &Path) -> (LidStore, Vec<LidFileError>) {
        LidStore::read_guid2lid(text, file, false)
    }

    /// `strict`: stop at the first bad line (its error is the only one returned).
    fn read_guid2lid(text: &str, file: &Path, strict: bool) -> (LidStore, Vec<LidFileError>) {
        let err = |line: usize, what: String| LidFileError {
            file: file.to_path_buf(),
            line,
            what,
        };
        let mut by_guid = HashMap::new();
        let mut owner: HashMap<u16, (Guid, usize)> = HashMap::new();
        let mut bad = Vec::new();
        for (n, raw) in text.lines().enumerate() {
            let line = n + 1;
            let t = raw.trim();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            let parsed = (|| {
                let f: Vec<&str> = t.split_whitespace().collect();
                if f.len() != 3 {
                    return Err(err(
                        line,
                        format!("expected `<guid> <min lid> <max lid>`, got \"{t}\""),
                    ));
                }
                let num = |s: &str, what: &str| {
                    let h = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X"));
                    match h {
                        Some(h) => u64::from_str_radix(h, 16),
                        None => s.parse::<u64>(),
                    }
                    .map_err(|_| err(line, format!("{what}: \"{s}\" is not a number")))
                };
                let guid: Guid = f[0]
                    .parse()
                    .map_err(|e| err(line, format!("guid: \"{}\" is not a GUID: {e}", f[0])))?;
                let (lo, hi) = (num(f[1], "min lid")?, num(f[2], "max lid")?);
                if lo == 0 || hi > MAX_UNICAST as u64 || lo > hi {
                    return Err(err(
                        line,
                        format!("LID range {lo:#x}..{hi:#x} is not a unicast range"),
                    ));
                }
                let len = hi - lo + 1;
                if !len.is_power_of_two() || len > 128 || lo % len != 0 {
                    return Err(err(
                        line,
                        format!(
                            "LID range {lo:#x}..{hi:#x} is not an aligned power-of-two \
                             range of at most 128 LIDs"
                        ),
                    ));
                }
                let r = LidRange {
                    base: Lid(lo as u16),
                    lmc: len.trailing_zeros() as u8,
                };
                if by_guid.contains_key(&guid) {
                    return Err(err(line, format!("GUID {guid} appears twice")));
                }
                for l in r.lids() {
                    if let Some(&(other, at)) = owner.get(&l) {
                        return Err(err(
                            line,
                            format!("LID {l:#x} of {guid} is also given to {other} (line {at})"),
                        ));
                    }
                }
                Ok((guid, r))
            })();
            match parsed {
                Ok((guid, r)) => {
                    for l in r.lids() {
                        owner.insert(l, (guid, line));
                    }
                    by_guid.insert(guid, r);
                }
                Err(e) => {
                    bad.push(e);
                    if strict {
                        break;
                    }
                }
            }
        }
        (LidStore { by_guid }, bad)
    }

    /// Loads a `guid2lid` file; a missing file is an empty store.
    pub fn load(path: &Path) -> Result<LidStore, LidFileError> {
        match std::fs::read(path) {
            Ok(b) => LidStore::from_guid2lid(&String::from_utf8_lossy(&b), path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(LidStore::new()),
            Err(e) => Err(LidFileError {
                file: path.to_path_buf(),
                line: 0,
                what: e.to_string(),
            }),
        }
    }

    /// Saves so that a crash or a full disk never leaves a half-written store (see
    /// [`crate::state_file::replace`]).
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        crate::state_file::replace(path, &self.to_guid2lid())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::NodeSpec;

    fn fabric(cas: u64) -> Fabric {
        let mut f = Fabric::new();
        let s = f
            .add_node(NodeSpec::new(NodeKind::Switch, Guid(0x20_0000), "s", 36))
            .unwrap();
        for i in 0..cas {
            let h = f
                .add_node(NodeSpec::new(NodeKind::Ca, Guid(0x10_0000 + 4 * i), "h", 1))
                .unwrap();
            let (a, b) = (f.port_of(s, 1 + i as u8).unwrap(), f.port_of(h, 1).unwrap());
            f.connect(a, b).unwrap();
        }
        f
    }

    fn lids(f: &Fabric) -> Vec<(Guid, Lid, u8)> {
        let mut v: Vec<_> = f
            .end_ports()
            .map(|p| (f.port(p).guid, f.port(p).lid, f.port(p).lmc))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_lenient_read_keeps_the_good_lines_and_names_the_bad() {
        let text = "0x0000000000000001 0x0001 0x0001\n\
                    garbage here\n\
                    0x0000000000000002 0x0002 0x0002\n\
                    0x0000000000000003 0x0002 0x0002\n\
                    0x0000000000000001 0x0009 0x0009\n\
                    0x0000000000000004 0x0005 0x0006\n";
        let file = Path::new("sd/guid2lid");
        let (s, bad) = LidStore::from_guid2lid_lenient(text, file);
        assert_eq!(
            s.get(Guid(1)).map(|r| r.base),
            Some(Lid(1)),
            "first claim kept"
        );
        assert_eq!(s.get(Guid(2)).map(|r| r.base), Some(Lid(2)));
        assert_eq!(s.get(Guid(3)), None, "its LID belongs to line 3");
        assert_eq!(s.get(Guid(4)), None, "misaligned");
        let lines: Vec<usize> = bad.iter().map(|e| e.line).collect();
        assert_eq!(lines, [2, 4, 5, 6]);
        assert!(bad[2].to_string().contains("appears twice"), "{}", bad[2]);
        // Strict: the first bad line is the error.
        let e = LidStore::from_guid2lid(text, file).unwrap_err();
        assert_eq!(e.line, 2);
    }

    #[test]
    fn save_replaces_a_planted_link_instead_of_writing_through_it() {
        let dir = std::env::temp_dir().join(format!("ibsm-lid-save-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("guid2lid");
        let victim = dir.join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let tmp = dir.join(format!("guid2lid.tmp.{}", std::process::id()));
        std::os::unix::fs::symlink(&victim, &tmp).unwrap();
        let mut f = fabric(2);
        let mut s = LidStore::new();
        s.assign(&mut f, 0).unwrap();
        s.save(&path).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert_eq!(LidStore::load(&path).unwrap(), s);
        assert!(!tmp.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn aligned_ranges_and_switch_lmc_zero() {
        let mut f = fabric(3);
        let mut s = LidStore::new();
        let r = s.assign(&mut f, 2).unwrap();
        assert_eq!(r.assigned, 4);
        for (g, lid, lmc) in lids(&f) {
            if g == Guid(0x20_0000) {
                assert_eq!(lmc, 0);
            } else {
                assert_eq!(lmc, 2);
                assert_eq!(lid.0 % 4, 0, "{g}");
            }
        }
    }

    #[test]
    fn restart_keeps_every_lid_and_new_nodes_do_not_renumber() {
        let mut f = fabric(5);
        let mut s = LidStore::new();
        s.assign(&mut f, 0).unwrap();
        let before = lids(&f);
        let text = s.to_guid2lid();
        let mut s2 = LidStore::from_guid2lid(&text, Path::new("guid2lid")).unwrap();
        let mut f2 = fabric(7);
        let r = s2.assign(&mut f2, 0).unwrap();
        assert_eq!(r.kept, 6);
        assert_eq!(r.assigned, 2);
        let after = lids(&f2);
        for b in &before {
            assert!(after.contains(b), "{b:?} moved");
        }
        // A port that leaves keeps its range reserved; others do not move.
        let mut f3 = fabric(3);
        s2.assign(&mut f3, 0).unwrap();
        let mut f4 = fabric(7);
        s2.assign(&mut f4, 0).unwrap();
        assert_eq!(lids(&f4), after);
    }

    #[test]
    fn existing_lids_are_adopted() {
        let mut f = fabric(2);
        let p = f.port_by_guid(Guid(0x10_0001)).unwrap();
        f.port_mut(p).lid = Lid(0x40);
        let mut s = LidStore::new();
        let r = s.assign(&mut f, 0).unwrap();
        assert_eq!(r.adopted, 1);
        assert_eq!(f.port(p).lid, Lid(0x40));
    }

    #[test]
    fn exhaustion_is_an_error_and_changes_nothing() {
        let mut f = fabric(30);
        let mut s = LidStore::new();
        // Fill nearly the whole space with remembered absent ports.
        let mut text = String::new();
        for i in 0..(MAX_UNICAST as u64 / 128 - 1) {
            let _ = writeln!(
                text,
                "0x{:x} 0x{:x} 0x{:x}",
                0x9000_0000 + i,
                128 + i * 128,
                255 + i * 128
            );
        }
        let mut s_full = LidStore::from_guid2lid(&text, Path::new("g")).unwrap();
        let before = f.clone();
        // LMC 7: 128 LIDs per CA; only ranges freed by reclaiming could serve them.
        let r = s_full.assign(&mut f, 7);
        assert!(r.is_ok(), "reclaiming absent ports must make room: {r:?}");
        assert!(r.unwrap().reclaimed > 0);
        let mut f = before.clone();
        let err = s.assign(&mut f, 8).unwrap_err();
        assert_eq!(err, LidError::BadLmc(8));
        // Really too many ports: 400 CAs at LMC 7 need 51,200 LIDs (cabled in pairs: a
        // port without a link gets no LID).
        let mut big = Fabric::new();
        for i in 0..400u64 {
            let n = big
                .add_node(NodeSpec::new(NodeKind::Ca, Guid(0x1000 + 2 * i), "h", 1))
                .unwrap();
            if i % 2 == 1 {
                let a = big.port_of(sm_core_node(n.0 - 1), 1).unwrap();
                let b = big.port_of(n, 1).unwrap();
                big.connect(a, b).unwrap();
            }
        }
        let snapshot = big.clone();
        let err = LidStore::new().assign(&mut big, 7).unwrap_err();
        assert!(matches!(err, LidError::Exhausted { lmc: 7, .. }));
        assert_eq!(big, snapshot);
    }

    fn sm_core_node(i: u32) -> crate::fabric::NodeIdx {
        crate::fabric::NodeIdx(i)
    }

    #[test]
    fn unlinked_ca_ports_get_no_lid() {
        let mut f = fabric(1);
        let lone = f
            .add_node(NodeSpec::new(NodeKind::Ca, Guid(0x7000), "lone", 2))
            .unwrap();
        let mut s = LidStore::new();
        s.assign(&mut f, 0).unwrap();
        for p in f.node_ports(lone) {
            assert_eq!(f.port(p).lid, Lid(0));
        }
        assert_eq!(s.len(), 2);
    }

    #[test]
    fn bad_files_name_the_line() {
        let p = Path::new("/var/cache/ibsm/guid2lid");
        let cases = [
            ("0x1 0x1 0x1\n\n0x2 zz 0x2\n", 3),
            ("0x1 0x1\n", 1),
            ("0x1 0x1 0x1\n0x2 0x1 0x1\n", 2),
            ("0x1 0x1 0x1\n0x1 0x2 0x2\n", 2),
            ("0x1 0x2 0x4\n", 1),
            ("0x1 0x0 0x0\n", 1),
            ("0x1 0xc000 0xc000\n", 1),
            ("0x1 0x1 0x1\n0xg 0x2 0x2\n", 2),
            ("0x+1 0x1 0x1\n", 1),
        ];
        for (text, line) in cases {
            let e = LidStore::from_guid2lid(text, p).unwrap_err();
            assert_eq!((e.file.as_path(), e.line), (p, line), "{text:?}: {e}");
        }
        let ok =
            LidStore::from_guid2lid("# comment\n0x0000000000100001 0x0004 0x0007\n\n", p).unwrap();
        assert_eq!(
            ok.get(Guid(0x10_0001)),
            Some(LidRange {
                base: Lid(4),
                lmc: 2
            })
        );
    }

    #[test]
    fn reads_what_opensm_wrote() {
        // guid2lid as OpenSM 3.3.23 wrote it for ibsim's net.2sw2path4hca2port.
        let text = "0x0000000000100004 0x0005 0x0005\n\n0x0000000000100005 0x0006 0x0006\n\n\
                    0x0000000000200000 0x0001 0x0001\n\n0x0000000000200001 0x0003 0x0003\n\n\
                    0x0000000000100001 0x0002 0x0002\n\n0x0000000000100002 0x0004 0x0004\n\n";
        let s = LidStore::from_guid2lid(text, Path::new("guid2lid")).unwrap();
        assert_eq!(s.len(), 6);
        assert_eq!(s.get(Guid(0x20_0001)).map(|r| r.base), Some(Lid(3)));
        let again = LidStore::from_guid2lid(&s.to_guid2lid(), Path::new("x")).unwrap();
        assert_eq!(again, s);
    }
}
