//! Loops that run on the rayon pool only when there is enough work to pay for it. Handing a
//! loop to the pool from outside it (waking sleeping workers, waiting on a latch) costs tens
//! of microseconds each time, more than the whole of a small fabric's routing; and on a
//! machine with few cores, woken workers take CPU from the fabric's own I/O.

use rayon::prelude::*;

/// Below this many cells (switches x switches, or switches x LIDs) a loop stays on the
/// calling thread.
const MIN_PARALLEL_CELLS: usize = 1 << 15;

/// Whether a loop over `cells` units of work goes to the pool.
pub(crate) fn worth(cells: usize) -> bool {
    cells >= MIN_PARALLEL_CELLS
}

/// `data` in chunks of `size`, each given its index and a per-worker scratch from `init`.
pub(crate) fn chunks<T: Send, S>(
    data: &mut [T],
    size: usize,
    init: impl Fn() -> S + Sync + Send,
    f: impl Fn(&mut S, usize, &mut [T]) + Sync + Send,
) {
    let size = size.max(1);
    if worth(data.len()) {
        data.par_chunks_mut(size)
            .enumerate()
            .for_each_init(init, |s, (i, c)| f(s, i, c));
    } else {
        let mut s = init();
        for (i, c) in data.chunks_mut(size).enumerate() {
            f(&mut s, i, c);
        }
    }
}

/// Like [`chunks`], summing what `f` returns.
pub(crate) fn chunks_sum<T: Send, S>(
    data: &mut [T],
    size: usize,
    init: impl Fn() -> S + Sync + Send,
    f: impl Fn(&mut S, usize, &mut [T]) -> usize + Sync + Send,
) -> usize {
    let size = size.max(1);
    if worth(data.len()) {
        data.par_chunks_mut(size)
            .enumerate()
            .map_init(init, |s, (i, c)| f(s, i, c))
            .sum()
    } else {
        let mut s = init();
        data.chunks_mut(size)
            .enumerate()
            .map(|(i, c)| f(&mut s, i, c))
            .sum()
    }
}

/// Each element of `data` with its index, going to the pool when `cells` (the work all the
/// elements hold together) is worth it.
pub(crate) fn each<T: Send, S>(
    data: &mut [T],
    cells: usize,
    init: impl Fn() -> S + Sync + Send,
    f: impl Fn(&mut S, usize, &mut T) + Sync + Send,
) {
    if worth(cells) {
        data.par_iter_mut()
            .enumerate()
            .for_each_init(init, |s, (i, t)| f(s, i, t));
    } else {
        let mut s = init();
        for (i, t) in data.iter_mut().enumerate() {
            f(&mut s, i, t);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_and_large_loops_give_the_same_result() {
        for n in [0usize, 1, 7, 100, 300] {
            let mut a = vec![0u32; n * n];
            chunks(
                &mut a,
                n,
                || 0u32,
                |calls, i, c| {
                    *calls += 1;
                    for (j, v) in c.iter_mut().enumerate() {
                        *v = (i * 1000 + j) as u32;
                    }
                },
            );
            for (k, v) in a.iter().enumerate() {
                assert_eq!(*v as usize, (k / n) * 1000 + k % n);
            }
            let total = chunks_sum(&mut a, n, || (), |_, i, c| i * c.len());
            assert_eq!(total, (0..n).map(|i| i * n).sum::<usize>());
            let mut b = vec![0usize; n];
            each(&mut b, n * n, || (), |_, i, t| *t = i * 2);
            assert!(b.iter().enumerate().all(|(i, &v)| v == i * 2));
        }
        assert!(!worth(1000) && worth(1 << 20));
    }
}
