//! A switch's forwarding table as an SM keeps it between sweeps: clones share storage, and
//! a change copies only the part it falls in.
//!
//! A repair changes a few entries on many switches while the SA's snapshot still holds the
//! previous tables; with one shared array per switch every touched table was copied whole
//! (44 KB each at 48K LIDs). Chunks of [`CHUNK`] entries (sixteen LFT blocks) keep that copy
//! to one kilobyte per switch.

use std::sync::Arc;

/// Entries per chunk: a multiple of the 64 entries of an LFT block, so every block lies in
/// one chunk.
pub const CHUNK: usize = 1024;

/// Output port per LID (index = LID), chunked behind `Arc`s.
#[derive(Clone, Default)]
pub struct LftTable {
    chunks: Vec<Arc<[u8; CHUNK]>>,
    len: usize,
}

impl LftTable {
    /// An empty table.
    pub const fn new() -> LftTable {
        LftTable {
            chunks: Vec::new(),
            len: 0,
        }
    }

    /// A table holding `entries`.
    pub fn from_slice(entries: &[u8]) -> LftTable {
        let chunks = entries
            .chunks(CHUNK)
            .map(|c| {
                let mut a = [0u8; CHUNK];
                a[..c.len()].copy_from_slice(c);
                Arc::new(a)
            })
            .collect();
        LftTable {
            chunks,
            len: entries.len(),
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The entry for `lid`, if the table reaches it.
    #[inline]
    pub fn get(&self, lid: usize) -> Option<u8> {
        if lid >= self.len {
            return None;
        }
        Some(self.chunks[lid / CHUNK][lid % CHUNK])
    }

    /// Sets the entry for `lid`, growing the table with `fill` first if it is too short;
    /// only the chunk written is copied when a clone shares it.
    pub fn set(&mut self, lid: usize, port: u8, fill: u8) {
        if lid >= self.len {
            self.resize(lid + 1, fill);
        }
        Arc::make_mut(&mut self.chunks[lid / CHUNK])[lid % CHUNK] = port;
    }

    /// Grows or shrinks the table to `len` entries; new ones hold `fill`.
    pub fn resize(&mut self, len: usize, fill: u8) {
        if len < self.len {
            self.chunks.truncate(len.div_ceil(CHUNK));
            self.len = len;
            return;
        }
        let mut at = self.len;
        while at < len {
            if at % CHUNK == 0 {
                self.chunks.push(Arc::new([fill; CHUNK]));
                at = (at + CHUNK).min(len);
            } else {
                let c = Arc::make_mut(&mut self.chunks[at / CHUNK]);
                let end = (at / CHUNK + 1) * CHUNK;
                let end = end.min(len);
                c[at % CHUNK..at % CHUNK + (end - at)].fill(fill);
                at = end;
            }
        }
        self.len = len;
    }

    /// The entries from `start` up to `len` of them, as far as the table reaches and within
    /// one chunk: `start` on a 64-entry boundary and `len` at most 64 read one LFT block.
    pub fn run(&self, start: usize, len: usize) -> &[u8] {
        if start >= self.len {
            return &[];
        }
        let c = &self.chunks[start / CHUNK];
        let off = start % CHUNK;
        let end = (off + len).min(CHUNK).min(off + (self.len - start));
        &c[off..end]
    }

    /// Every entry, in LID order.
    pub fn iter(&self) -> impl Iterator<Item = u8> + '_ {
        self.chunks
            .iter()
            .flat_map(|c| c.iter().copied())
            .take(self.len)
    }

    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.len);
        for c in &self.chunks {
            let n = (self.len - v.len()).min(CHUNK);
            v.extend_from_slice(&c[..n]);
        }
        v
    }

    /// Whether the table holds exactly `entries`.
    pub fn eq_slice(&self, entries: &[u8]) -> bool {
        self.len == entries.len()
            && self
                .chunks
                .iter()
                .zip(entries.chunks(CHUNK))
                .all(|(c, e)| &c[..e.len()] == e)
    }
}

/// Read access to a forwarding table, however it is stored.
pub trait LftRead {
    /// The entry for `lid`, if the table reaches it.
    fn entry(&self, lid: usize) -> Option<u8>;
    /// Every entry, in LID order.
    fn entries(&self) -> impl Iterator<Item = u8> + '_;
}

impl LftRead for LftTable {
    fn entry(&self, lid: usize) -> Option<u8> {
        self.get(lid)
    }
    fn entries(&self) -> impl Iterator<Item = u8> + '_ {
        self.iter()
    }
}

impl LftRead for [u8] {
    fn entry(&self, lid: usize) -> Option<u8> {
        self.get(lid).copied()
    }
    fn entries(&self) -> impl Iterator<Item = u8> + '_ {
        self.iter().copied()
    }
}

impl LftRead for Vec<u8> {
    fn entry(&self, lid: usize) -> Option<u8> {
        self.get(lid).copied()
    }
    fn entries(&self) -> impl Iterator<Item = u8> + '_ {
        self.iter().copied()
    }
}

impl PartialEq for LftTable {
    fn eq(&self, other: &LftTable) -> bool {
        self.len == other.len
            && crate::idx::chunks_eq(&self.chunks, &other.chunks, |i| {
                (self.len - i * CHUNK).min(CHUNK)
            })
    }
}

impl Eq for LftTable {}

impl From<Vec<u8>> for LftTable {
    fn from(v: Vec<u8>) -> LftTable {
        LftTable::from_slice(&v)
    }
}

impl std::fmt::Debug for LftTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LftTable({} entries)", self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 % 251) as u8).collect()
    }

    #[test]
    fn round_trips_at_every_edge_of_a_chunk() {
        for n in [0, 1, 63, 64, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 17] {
            let v = sample(n);
            let t = LftTable::from_slice(&v);
            assert_eq!(t.len(), n);
            assert_eq!(t.to_vec(), v);
            assert_eq!(t.iter().collect::<Vec<_>>(), v);
            assert!(t.eq_slice(&v));
            assert_eq!(t.get(n), None);
            if n > 0 {
                assert_eq!(t.get(n - 1), Some(v[n - 1]));
                assert!(!t.eq_slice(&v[..n - 1]));
            }
        }
    }

    #[test]
    fn a_change_copies_only_its_chunk_and_leaves_the_clone_alone() {
        let v = sample(4 * CHUNK);
        let a = LftTable::from_slice(&v);
        let mut b = a.clone();
        b.set(CHUNK + 5, 200, 255);
        assert_eq!(a.to_vec(), v, "the clone sharing the storage is untouched");
        assert_eq!(b.get(CHUNK + 5), Some(200));
        let shared = a
            .chunks
            .iter()
            .zip(&b.chunks)
            .filter(|(x, y)| Arc::ptr_eq(x, y))
            .count();
        assert_eq!(shared, 3, "only the chunk written was copied");
        assert_ne!(a, b);
        b.set(CHUNK + 5, v[CHUNK + 5], 255);
        assert_eq!(a, b);
        // What lies past the end of a chunk's used part does not count.
        let (mut c, mut d) = (a.clone(), LftTable::from_slice(&v[..CHUNK + 10]));
        c.set(CHUNK + 20, 1, 255);
        c.resize(CHUNK + 10, 255);
        d.set(CHUNK + 20, 2, 255);
        d.resize(CHUNK + 10, 255);
        assert_eq!(c, d);
        assert_ne!(c, a);
    }

    #[test]
    fn set_past_the_end_grows_with_the_fill() {
        let mut t = LftTable::from_slice(&[1, 2, 3]);
        t.set(CHUNK + 2, 9, 255);
        let mut want = vec![1, 2, 3];
        want.resize(CHUNK + 2, 255);
        want.push(9);
        assert_eq!(t.to_vec(), want);
        t.resize(2, 0);
        assert_eq!(t.to_vec(), vec![1, 2]);
        t.resize(5, 7);
        assert_eq!(t.to_vec(), vec![1, 2, 7, 7, 7]);
    }

    #[test]
    fn runs_read_blocks_without_crossing_the_end() {
        let v = sample(CHUNK + 100);
        let t = LftTable::from_slice(&v);
        assert_eq!(t.run(64, 64), &v[64..128]);
        assert_eq!(t.run(CHUNK + 64, 64), &v[CHUNK + 64..CHUNK + 100]);
        assert_eq!(t.run(CHUNK + 100, 64), &[] as &[u8]);
        assert_eq!(
            t.run(CHUNK - 10, 64),
            &v[CHUNK - 10..CHUNK],
            "stops at the chunk"
        );
    }
}
