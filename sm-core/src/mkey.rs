//! M_Keys (IBA 14.2.4): the key each port's agent checks SMPs against, per port when the
//! SM derives one for every port from its configured key, the `guid2mkey` store of the
//! keys ports hold (OpenSM's format: `0xPORTGUID 0xMKEY`), and the `neighbors` store that
//! says whose key to present before discovery has read the node behind a port.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sm_mad::Guid;

use crate::state_file::number;

/// The key of port `port_guid` when every port gets its own: SipHash-2-4 of the GUID keyed
/// with the configured key, so that a host that reads its own port's key (protection level
/// 0) learns nothing about the others'. Never 0, which means "no key".
pub fn derive(base: u64, port_guid: Guid) -> u64 {
    let k = siphash24(
        base,
        base.rotate_left(32) ^ 0x6d6b_6579,
        &port_guid.0.to_be_bytes(),
    );
    if k == 0 { 1 } else { k }
}

/// SipHash-2-4 (Aumasson and Bernstein) of `msg` under the key `(k0, k1)`.
fn siphash24(k0: u64, k1: u64, msg: &[u8]) -> u64 {
    let mut v = [
        k0 ^ 0x736f_6d65_7073_6575,
        k1 ^ 0x646f_7261_6e64_6f6d,
        k0 ^ 0x6c79_6765_6e65_7261,
        k1 ^ 0x7465_6462_7974_6573,
    ];
    fn round(v: &mut [u64; 4]) {
        v[0] = v[0].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(13) ^ v[0];
        v[0] = v[0].rotate_left(32);
        v[2] = v[2].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(16) ^ v[2];
        v[0] = v[0].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(21) ^ v[0];
        v[2] = v[2].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(17) ^ v[2];
        v[2] = v[2].rotate_left(32);
    }
    let mut compress = |m: u64| {
        v[3] ^= m;
        round(&mut v);
        round(&mut v);
        v[0] ^= m;
    };
    let mut chunks = msg.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        compress(u64::from_le_bytes(w));
    }
    let rest = chunks.remainder();
    let mut last = [0u8; 8];
    last[..rest.len()].copy_from_slice(rest);
    compress(u64::from_le_bytes(last) | (msg.len() as u64 & 0xff) << 56);
    v[2] ^= 0xff;
    for _ in 0..4 {
        round(&mut v);
    }
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

/// A bad line of a state file, skipped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}:{line}: {what}", file.display())]
pub struct KeyFileError {
    pub file: PathBuf,
    pub line: usize,
    pub what: String,
}

/// Reads `text` line by line with `parse`, skipping blank and `#` lines and keeping the
/// good lines when some are bad.
fn read_lines<T>(
    text: &str,
    file: &Path,
    mut parse: impl FnMut(&[&str]) -> Result<T, String>,
) -> (Vec<T>, Vec<KeyFileError>) {
    let mut good = Vec::new();
    let mut bad = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let t = raw.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let f: Vec<&str> = t.split_whitespace().collect();
        match parse(&f) {
            Ok(v) => good.push(v),
            Err(what) => bad.push(KeyFileError {
                file: file.to_path_buf(),
                line: n + 1,
                what,
            }),
        }
    }
    (good, bad)
}

fn guid(s: &str) -> Result<Guid, String> {
    s.parse().map_err(|e| format!("\"{s}\" is not a GUID: {e}"))
}

/// The M_Keys ports hold, by port GUID (a switch's under its port 0's GUID).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyStore {
    by_guid: BTreeMap<Guid, u64>,
}

impl KeyStore {
    pub fn get(&self, port_guid: Guid) -> Option<u64> {
        self.by_guid.get(&port_guid).copied()
    }

    /// Notes the key a port holds; true when that changed the store.
    pub fn set(&mut self, port_guid: Guid, key: u64) -> bool {
        self.by_guid.insert(port_guid, key) != Some(key)
    }

    pub fn len(&self) -> usize {
        self.by_guid.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_guid.is_empty()
    }

    pub fn to_guid2mkey(&self) -> String {
        let mut s = String::new();
        for (g, k) in &self.by_guid {
            s.push_str(&format!("{:#018x} {k:#018x}\n", g.0));
        }
        s
    }

    /// Reads a `guid2mkey` file: the bad lines are returned, the rest kept.
    pub fn from_guid2mkey(text: &str, file: &Path) -> (KeyStore, Vec<KeyFileError>) {
        let (good, bad) = read_lines(text, file, |f| {
            let [g, k] = f else {
                return Err(format!(
                    "expected `<port guid> <m_key>`, got {} fields",
                    f.len()
                ));
            };
            let key = number(k).ok_or_else(|| format!("m_key: \"{k}\" is not a number"))?;
            Ok((guid(g)?, key))
        });
        (
            KeyStore {
                by_guid: good.into_iter().collect(),
            },
            bad,
        )
    }
}

/// Who is behind each port: (node GUID, port number) to the GUID of the key holder there
/// (the port GUID of a CA port, a switch's port 0 GUID). Written `0xNODEGUID:PORT 0xGUID`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Neighbors {
    behind: BTreeMap<(Guid, u8), Guid>,
}

impl Neighbors {
    pub fn get(&self, node: Guid, port: u8) -> Option<Guid> {
        self.behind.get(&(node, port)).copied()
    }

    /// True when that changed the store.
    pub fn set(&mut self, node: Guid, port: u8, holder: Guid) -> bool {
        self.behind.insert((node, port), holder) != Some(holder)
    }

    pub fn len(&self) -> usize {
        self.behind.len()
    }

    pub fn is_empty(&self) -> bool {
        self.behind.is_empty()
    }

    pub fn to_text(&self) -> String {
        let mut s = String::new();
        for ((n, p), g) in &self.behind {
            s.push_str(&format!("{:#018x}:{p} {:#018x}\n", n.0, g.0));
        }
        s
    }

    pub fn from_text(text: &str, file: &Path) -> (Neighbors, Vec<KeyFileError>) {
        let (good, bad) = read_lines(text, file, |f| {
            let [at, g] = f else {
                return Err(format!(
                    "expected `<node guid>:<port> <guid>`, got {} fields",
                    f.len()
                ));
            };
            let (n, p) = at
                .split_once(':')
                .ok_or_else(|| format!("\"{at}\" is not <node guid>:<port>"))?;
            let port = p
                .parse::<u8>()
                .map_err(|_| format!("port: \"{p}\" is not a port number"))?;
            Ok(((guid(n)?, port), guid(g)?))
        });
        (
            Neighbors {
                behind: good.into_iter().collect(),
            },
            bad,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference vector of the SipHash paper (appendix A): key 00..0f, message 00..0e.
    #[test]
    fn siphash_matches_the_papers_vector() {
        let k0 = u64::from_le_bytes([0, 1, 2, 3, 4, 5, 6, 7]);
        let k1 = u64::from_le_bytes([8, 9, 10, 11, 12, 13, 14, 15]);
        let msg: Vec<u8> = (0..15).collect();
        assert_eq!(siphash24(k0, k1, &msg), 0xa129_ca61_49be_45e5);
    }

    #[test]
    fn derived_keys_differ_per_port_and_per_base() {
        let a = derive(0x1234, Guid(1));
        assert_eq!(a, derive(0x1234, Guid(1)), "deterministic");
        assert_ne!(a, derive(0x1234, Guid(2)));
        assert_ne!(a, derive(0x1235, Guid(1)));
        assert_ne!(a, 0);
    }

    #[test]
    fn stores_round_trip_and_skip_bad_lines() {
        let file = Path::new("sd/guid2mkey");
        let mut k = KeyStore::default();
        assert!(k.set(Guid(0x11), 0xabc));
        assert!(!k.set(Guid(0x11), 0xabc));
        k.set(Guid(0x22), 7);
        let text = k.to_guid2mkey();
        assert_eq!(
            text,
            "0x0000000000000011 0x0000000000000abc\n0x0000000000000022 0x0000000000000007\n"
        );
        let (back, bad) = KeyStore::from_guid2mkey(&format!("# c\n{text}junk\n0x33 nope\n"), file);
        assert_eq!(back, k);
        assert_eq!(bad.len(), 2);
        assert_eq!(
            bad[0].to_string(),
            "sd/guid2mkey:4: expected `<port guid> <m_key>`, got 1 fields"
        );
        assert!(bad[1].to_string().starts_with("sd/guid2mkey:5: m_key"));

        let mut n = Neighbors::default();
        n.set(Guid(5), 3, Guid(0x99));
        let (back, bad) = Neighbors::from_text(&format!("{}0x6:x 0x1\n", n.to_text()), file);
        assert_eq!(back, n);
        assert_eq!(back.get(Guid(5), 3), Some(Guid(0x99)));
        assert!(bad[0].what.starts_with("port"), "{bad:?}");
    }
}
