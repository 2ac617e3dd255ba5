//! Dense typed indices and the vectors they address, shared by every crate.
//!
//! An index type (`NodeIdx`, `PortIdx`, a routing crate's `SwIdx`) implements [`Idx`]; an
//! [`IdxVec<I, T>`] can only be indexed by `I`, so a port index never reads a node table.
//! [`OptIdx<I>`] is an index or nothing in four bytes (`u32::MAX` is the niche), for the
//! dense "which X, if any" tables that used to carry a bare sentinel.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

/// A dense index: a `u32` newtype.
pub trait Idx: Copy + Eq + Ord + fmt::Debug {
    fn from_u32(i: u32) -> Self;
    fn to_u32(self) -> u32;
    /// As a `usize` for indexing.
    #[inline]
    fn index(self) -> usize {
        self.to_u32() as usize
    }
}

/// Declares `pub struct $name(pub u32)` as an [`Idx`]; `$vis struct $name` declares it with
/// that visibility instead (an index private to a crate).
#[macro_export]
macro_rules! dense_index {
    ($(#[$m:meta])* $vis:vis struct $name:ident) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
        $vis struct $name($vis u32);

        impl $name {
            /// As a `usize` for indexing.
            #[allow(dead_code)]
            $vis const fn idx(self) -> usize {
                self.0 as usize
            }
        }

        impl $crate::idx::Idx for $name {
            #[inline]
            fn from_u32(i: u32) -> Self {
                $name(i)
            }
            #[inline]
            fn to_u32(self) -> u32 {
                self.0
            }
        }
    };
    ($(#[$m:meta])* $name:ident) => {
        $crate::dense_index!($(#[$m])* pub struct $name);
    };
}

/// A vector addressed by one index type.
#[derive(Clone, PartialEq, Eq)]
pub struct IdxVec<I, T> {
    items: Vec<T>,
    _idx: PhantomData<fn(I)>,
}

impl<I: Idx, T> IdxVec<I, T> {
    pub fn new() -> Self {
        IdxVec {
            items: Vec::new(),
            _idx: PhantomData,
        }
    }

    /// `n` copies of `value`.
    pub fn filled(value: T, n: usize) -> Self
    where
        T: Clone,
    {
        IdxVec::from(vec![value; n])
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Appends and returns the new element's index.
    pub fn push(&mut self, v: T) -> I {
        let i = I::from_u32(self.items.len() as u32);
        self.items.push(v);
        i
    }

    pub fn get(&self, i: I) -> Option<&T> {
        self.items.get(i.index())
    }

    pub fn get_mut(&mut self, i: I) -> Option<&mut T> {
        self.items.get_mut(i.index())
    }

    pub fn iter(&self) -> std::slice::Iter<'_, T> {
        self.items.iter()
    }

    pub fn iter_mut(&mut self) -> std::slice::IterMut<'_, T> {
        self.items.iter_mut()
    }

    /// Elements with their indices.
    pub fn iter_enumerated(&self) -> impl DoubleEndedIterator<Item = (I, &T)> + '_ {
        self.items
            .iter()
            .enumerate()
            .map(|(i, v)| (I::from_u32(i as u32), v))
    }

    /// Every index, in order.
    pub fn indices(&self) -> impl DoubleEndedIterator<Item = I> + use<I, T> {
        (0..self.items.len() as u32).map(I::from_u32)
    }

    /// Removes every element, keeping the allocation.
    pub fn clear(&mut self) {
        self.items.clear();
    }

    /// Grows (with `value`) or shrinks to `n` elements.
    pub fn resize(&mut self, n: usize, value: T)
    where
        T: Clone,
    {
        self.items.resize(n, value);
    }

    pub fn as_slice(&self) -> &[T] {
        &self.items
    }
}

impl<I: Idx, T> Default for IdxVec<I, T> {
    fn default() -> Self {
        IdxVec::new()
    }
}

impl<I: Idx, T> From<Vec<T>> for IdxVec<I, T> {
    fn from(items: Vec<T>) -> Self {
        IdxVec {
            items,
            _idx: PhantomData,
        }
    }
}

impl<I: Idx, T> FromIterator<T> for IdxVec<I, T> {
    fn from_iter<It: IntoIterator<Item = T>>(it: It) -> Self {
        IdxVec::from(it.into_iter().collect::<Vec<T>>())
    }
}

impl<I: Idx, T> std::ops::Index<I> for IdxVec<I, T> {
    type Output = T;
    #[inline]
    fn index(&self, i: I) -> &T {
        &self.items[i.index()]
    }
}

impl<I: Idx, T> std::ops::IndexMut<I> for IdxVec<I, T> {
    #[inline]
    fn index_mut(&mut self, i: I) -> &mut T {
        &mut self.items[i.index()]
    }
}

impl<'a, I: Idx, T> IntoIterator for &'a IdxVec<I, T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.items.iter()
    }
}

impl<I, T: fmt::Debug> fmt::Debug for IdxVec<I, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.items.iter()).finish()
    }
}

/// Elements per chunk of a [`CowVec`]: a change copies at most this many.
const COW_CHUNK: usize = 256;

/// A vector addressed by one index type whose clones share storage: it is kept in chunks
/// behind `Arc`s, a clone copies only the chunk pointers, and a change copies only the
/// chunk it falls in while another clone holds it. For models a snapshot holds while the
/// live copy changes in a few places.
///
/// Full chunks are `Arc<[T]>` (one pointer hop to an element, as close to a `Vec` as
/// sharing allows); the last, growing one is a `Vec`.
pub struct CowVec<I, T> {
    full: Vec<Arc<[T]>>,
    tail: Arc<Vec<T>>,
    len: usize,
    _idx: PhantomData<fn(I)>,
}

impl<I, T> Clone for CowVec<I, T> {
    fn clone(&self) -> Self {
        CowVec {
            full: self.full.clone(),
            tail: Arc::clone(&self.tail),
            len: self.len,
            _idx: PhantomData,
        }
    }
}

impl<I: Idx, T: Clone> CowVec<I, T> {
    pub fn new() -> Self {
        CowVec {
            full: Vec::new(),
            tail: Arc::new(Vec::new()),
            len: 0,
            _idx: PhantomData,
        }
    }

    /// `n` copies of `value`.
    pub fn filled(value: T, n: usize) -> Self {
        std::iter::repeat_n(value, n).collect()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends and returns the new element's index.
    pub fn push(&mut self, v: T) -> I {
        let i = I::from_u32(self.len as u32);
        Arc::make_mut(&mut self.tail).push(v);
        self.len += 1;
        if self.tail.len() == COW_CHUNK {
            let tail = std::mem::replace(&mut self.tail, Arc::new(Vec::new()));
            let items = Arc::try_unwrap(tail).unwrap_or_else(|shared| (*shared).clone());
            self.full.push(Arc::from(items));
        }
        i
    }

    #[inline]
    pub fn get(&self, i: I) -> Option<&T> {
        let i = i.index();
        match self.full.get(i / COW_CHUNK) {
            Some(c) => c.get(i % COW_CHUNK),
            None if i / COW_CHUNK == self.full.len() => self.tail.get(i % COW_CHUNK),
            None => None,
        }
    }

    /// The element, its chunk copied first if a clone shares it.
    #[inline]
    pub fn get_mut(&mut self, i: I) -> Option<&mut T> {
        let i = i.index();
        let full = self.full.len();
        match self.full.get_mut(i / COW_CHUNK) {
            Some(c) => Arc::make_mut(c).get_mut(i % COW_CHUNK),
            None if i / COW_CHUNK == full => Arc::make_mut(&mut self.tail).get_mut(i % COW_CHUNK),
            None => None,
        }
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &T> + '_ {
        self.full
            .iter()
            .flat_map(|c| c.iter())
            .chain(self.tail.iter())
    }

    /// Elements with their indices.
    pub fn iter_enumerated(&self) -> impl Iterator<Item = (I, &T)> + '_ {
        self.indices().zip(self.iter())
    }

    /// Every index, in order.
    pub fn indices(&self) -> impl DoubleEndedIterator<Item = I> + use<I, T> {
        (0..self.len as u32).map(I::from_u32)
    }
}

impl<I: Idx, T: Clone> Default for CowVec<I, T> {
    fn default() -> Self {
        CowVec::new()
    }
}

impl<I: Idx, T: Clone> FromIterator<T> for CowVec<I, T> {
    fn from_iter<It: IntoIterator<Item = T>>(it: It) -> Self {
        let mut v = CowVec::new();
        for x in it {
            v.push(x);
        }
        v
    }
}

impl<I: Idx, T: Clone> From<IdxVec<I, T>> for CowVec<I, T> {
    fn from(v: IdxVec<I, T>) -> Self {
        v.items.into_iter().collect()
    }
}

impl<I: Idx, T: Clone> std::ops::Index<I> for CowVec<I, T> {
    type Output = T;
    #[inline]
    fn index(&self, i: I) -> &T {
        let i = i.index();
        match self.full.get(i / COW_CHUNK) {
            Some(c) => &c[i % COW_CHUNK],
            None => &self.tail[i - self.full.len() * COW_CHUNK],
        }
    }
}

impl<I: Idx, T: Clone> std::ops::IndexMut<I> for CowVec<I, T> {
    #[inline]
    fn index_mut(&mut self, i: I) -> &mut T {
        let i = i.index();
        let base = self.full.len() * COW_CHUNK;
        match self.full.get_mut(i / COW_CHUNK) {
            Some(c) => &mut Arc::make_mut(c)[i % COW_CHUNK],
            None => &mut Arc::make_mut(&mut self.tail)[i - base],
        }
    }
}

/// Whether two runs of shared chunks hold the same elements: chunk `i` is compared over
/// its first `valid(i)` elements, and a chunk both runs share is equal without reading it.
pub(crate) fn chunks_eq<C, T>(a: &[Arc<C>], b: &[Arc<C>], valid: impl Fn(usize) -> usize) -> bool
where
    C: AsRef<[T]> + ?Sized,
    T: PartialEq,
{
    a.len() == b.len()
        && a.iter().zip(b).enumerate().all(|(i, (x, y))| {
            let (x, y): (&[T], &[T]) = ((**x).as_ref(), (**y).as_ref());
            let n = valid(i);
            std::ptr::eq(x, y) || x[..n] == y[..n]
        })
}

impl<I, T: PartialEq> PartialEq for CowVec<I, T> {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len
            && chunks_eq(&self.full, &other.full, |_| COW_CHUNK)
            && (Arc::ptr_eq(&self.tail, &other.tail) || self.tail == other.tail)
    }
}

impl<I, T: Eq> Eq for CowVec<I, T> {}

impl<'a, I: Idx, T: Clone> IntoIterator for &'a CowVec<I, T> {
    type Item = &'a T;
    type IntoIter = std::iter::Chain<
        std::iter::FlatMap<
            std::slice::Iter<'a, Arc<[T]>>,
            std::slice::Iter<'a, T>,
            fn(&'a Arc<[T]>) -> std::slice::Iter<'a, T>,
        >,
        std::slice::Iter<'a, T>,
    >;
    fn into_iter(self) -> Self::IntoIter {
        let f: fn(&'a Arc<[T]>) -> std::slice::Iter<'a, T> = |c| c.iter();
        self.full.iter().flat_map(f).chain(self.tail.iter())
    }
}

impl<I, T: fmt::Debug> fmt::Debug for CowVec<I, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.full.iter().flat_map(|c| c.iter()))
            .entries(self.tail.iter())
            .finish()
    }
}

/// An index or nothing, in the space of the index (`u32::MAX` means none).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct OptIdx<I> {
    raw: u32,
    _idx: PhantomData<fn(I)>,
}

impl<I: Idx> OptIdx<I> {
    pub const NONE: OptIdx<I> = OptIdx {
        raw: u32::MAX,
        _idx: PhantomData,
    };

    /// `i`; an index equal to the niche (never met: no table has 2^32 - 1 entries) reads
    /// back as none.
    pub fn some(i: I) -> Self {
        OptIdx {
            raw: i.to_u32(),
            _idx: PhantomData,
        }
    }

    #[inline]
    pub fn get(self) -> Option<I> {
        (self.raw != u32::MAX).then(|| I::from_u32(self.raw))
    }

    pub fn is_some(self) -> bool {
        self.raw != u32::MAX
    }

    pub fn is_none(self) -> bool {
        self.raw == u32::MAX
    }
}

impl<I: Idx> Default for OptIdx<I> {
    fn default() -> Self {
        OptIdx::NONE
    }
}

impl<I: Idx> From<Option<I>> for OptIdx<I> {
    fn from(o: Option<I>) -> Self {
        o.map_or(OptIdx::NONE, OptIdx::some)
    }
}

impl<I: Idx> fmt::Debug for OptIdx<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.get().fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::NodeIdx as T;

    #[test]
    fn typed_vectors_and_optional_indices() {
        let mut v: IdxVec<T, &str> = IdxVec::new();
        let a = v.push("a");
        let b = v.push("b");
        assert_eq!((a, b), (T(0), T(1)));
        assert_eq!(v[b], "b");
        v[a] = "z";
        assert_eq!(
            v.iter_enumerated().collect::<Vec<_>>(),
            vec![(T(0), &"z"), (T(1), &"b")]
        );
        assert_eq!(v.get(T(2)), None);
        let none: OptIdx<T> = OptIdx::default();
        assert_eq!(none.get(), None);
        assert_eq!(OptIdx::some(T(7)).get(), Some(T(7)));
        assert_eq!(OptIdx::from(Some(T(3))).get(), Some(T(3)));
        assert_eq!(std::mem::size_of::<OptIdx<T>>(), 4);
    }

    #[test]
    fn cow_vectors_copy_only_the_chunk_that_changes() {
        let n = COW_CHUNK * 3 + 5;
        let v: CowVec<T, u32> = (0..n as u32).collect();
        assert_eq!(v.len(), n);
        let mut w = v.clone();
        w[T(COW_CHUNK as u32 + 1)] = 99;
        *w.get_mut(T(n as u32 - 1)).unwrap() = 98;
        assert_eq!(w.get(T(n as u32)), None);
        // The snapshot is untouched; untouched chunks are shared, touched ones are not.
        assert!(v.iter().copied().eq(0..n as u32));
        assert_eq!(w[T(COW_CHUNK as u32 + 1)], 99);
        assert_eq!(w[T(n as u32 - 1)], 98);
        let mut shared: Vec<bool> = (0..3)
            .map(|c| Arc::ptr_eq(&v.full[c], &w.full[c]))
            .collect();
        shared.push(Arc::ptr_eq(&v.tail, &w.tail));
        assert_eq!(shared, [true, false, true, false]);
        // Growing past a chunk's end keeps indices and the clone apart.
        let mut g = w.clone();
        for k in 0..COW_CHUNK as u32 {
            g.push(1000 + k);
        }
        assert_eq!(g.len(), n + COW_CHUNK);
        assert_eq!(g[T(n as u32)], 1000);
        assert_eq!(g.get(T((n + COW_CHUNK) as u32)), None);
        assert_eq!(w.len(), n);
        assert_eq!(g.iter().count(), n + COW_CHUNK);
        assert_ne!(g, w);
        assert_eq!(w.clone(), w);
        assert_eq!(
            w.iter_enumerated().nth(COW_CHUNK + 1),
            Some((T(COW_CHUNK as u32 + 1), &99))
        );
    }
}
