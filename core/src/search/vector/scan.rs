//! The exact scan of a vector set: the int8 dot-product kernels (the build
//! for this CPU picked at run time) and the top-k over blocks of rows, the
//! blocks shared out among threads when the matrix is large.

use std::collections::BinaryHeap;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

#[inline(always)]
pub(super) fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    // Codes are in -127..=127, so each product fits an i16: 16-bit multiplies
    // (pmullw, baseline SSE2) widened into 16 i32 lanes vectorise well, where
    // 32-bit multiplies would need SSE4.1.
    let mut acc = [0i32; 16];
    let mut ca = a.chunks_exact(16);
    let mut cb = b.chunks_exact(16);
    for (x, y) in (&mut ca).zip(&mut cb) {
        for i in 0..16 {
            acc[i] += i32::from(i16::from(x[i]) * i16::from(y[i]));
        }
    }
    let mut s: i32 = acc.iter().sum();
    for (x, y) in ca.remainder().iter().zip(cb.remainder()) {
        s += i32::from(i16::from(*x) * i16::from(*y));
    }
    s
}

/// The same dot product written as a plain widening sum: built with AVX-512BW
/// it compiles to sign-extending loads and `vpmaddwd` on 512-bit registers
/// (pairs of 16-bit products summed into 32-bit lanes), 1.6× the throughput
/// of [`dot_i8`]'s AVX2 build on the benchmark VM; on SSE2 this form is
/// slower than [`dot_i8`], on AVX2 and SSE4.1 the two are even, so only the
/// AVX-512 build uses it. Integer arithmetic: both give the same sum.
#[inline(always)]
fn dot_i8_wide(a: &[i8], b: &[i8]) -> i32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| i32::from(*x) * i32::from(*y))
        .sum()
}

/// Rows scored per [`dot_rows`] call (its output stays in L1/L2).
pub(super) const SCAN_BLOCK: usize = 1024;

/// `out[j] = q · row j` for each `dim`-long row of `codes` (`out` is cleared first).
///
/// Compiled for x86-64 with AVX-512BW, with AVX2 and with SSE4.1 (and AArch64
/// NEON) besides the baseline, the version picked at run time by
/// `multiversion`: the x86-64 baseline (SSE2) has no sign-extending byte
/// loads, which made this loop 3–5× slower than the AVX2 build of the same
/// code on the benchmark VM, and the AVX-512BW build of [`dot_i8_wide`] is
/// 1.6× faster again than the AVX2 build of [`dot_i8`] there.
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512bw",
    "x86_64+avx2",
    "x86_64+sse4.1",
    "aarch64+neon"
))]
fn dot_rows(q: &[i8], codes: &[i8], dim: usize, out: &mut Vec<i32>) {
    out.clear();
    multiversion::target::match_target! {
        "x86_64+avx512bw" => out.extend(codes.chunks_exact(dim).map(|row| dot_i8_wide(q, row))),
        _ => out.extend(codes.chunks_exact(dim).map(|row| dot_i8(q, row))),
    }
}

#[derive(Debug, PartialEq)]
struct Scored(f32, usize);
impl Eq for Scored {}
impl PartialOrd for Scored {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Scored {
    // Reversed: the heap's top is the worst kept hit.
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        o.0.total_cmp(&self.0).then_with(|| self.1.cmp(&o.1))
    }
}

/// Bytes of codes per scan thread: a smaller matrix is scanned on the calling
/// thread alone (starting a thread costs tens of microseconds; 2 MiB of codes
/// take about a quarter of a millisecond).
const BYTES_PER_THREAD: usize = 2 << 20;

/// The most threads one scan uses.
const MAX_SCAN_THREADS: usize = 4;

/// Threads for a scan of `bytes` of codes: one per [`BYTES_PER_THREAD`], at
/// most one per CPU and [`MAX_SCAN_THREADS`].
fn scan_threads(bytes: usize) -> usize {
    static CPUS: OnceLock<usize> = OnceLock::new();
    let cpus = *CPUS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    cpus.min(MAX_SCAN_THREADS)
        .min(bytes.div_ceil(BYTES_PER_THREAD))
        .max(1)
}

/// The rows of one matrix scored for one quantised query.
pub(super) struct Matrix<'a> {
    /// `dim` codes per row.
    pub codes: &'a [i8],
    /// One scale per row.
    pub scales: &'a [f32],
    pub dim: usize,
    /// The quantised query and its scale.
    pub qc: &'a [i8],
    pub qs: f32,
    /// Which rows may be returned (all without one).
    pub accept: Option<&'a (dyn Fn(usize) -> bool + Sync)>,
}

impl Matrix<'_> {
    /// Threads worth using on this matrix: one per [`BYTES_PER_THREAD`] of
    /// codes, at most one per CPU and [`MAX_SCAN_THREADS`].
    pub(super) fn threads(&self) -> usize {
        scan_threads(self.codes.len())
    }

    /// The `depth` best rows, `(row, score)` with `score = (qc · row) * qs *
    /// scales[row]`, best first; see [`Matrix::top_from`].
    pub(super) fn top(&self, depth: usize) -> Vec<(usize, f32)> {
        self.top_from(depth, &AtomicUsize::new(0), self.threads())
    }

    /// The `depth` best rows of the blocks this call takes from `next`, on
    /// the calling thread and `threads - 1` scoped threads started for it
    /// (none kept: nothing to go stale across `fork()`), best first.
    ///
    /// Each thread takes the next block of [`SCAN_BLOCK`] rows until none is
    /// left, so a thread the OS runs late does less, and other callers
    /// sharing `next` (on the same matrix and query) take part in the same
    /// scan: their tops and this one together are the top of the whole
    /// matrix ([`merge_tops`]). Ties in score go to the lower row, so the
    /// result is the same however the blocks were shared out. A thread that
    /// cannot be started leaves its blocks to the others.
    pub(super) fn top_from(
        &self,
        depth: usize,
        next: &AtomicUsize,
        threads: usize,
    ) -> Vec<(usize, f32)> {
        if self.dim == 0 || depth == 0 {
            return Vec::new();
        }
        let part = || self.part(depth, next);
        let kept: Vec<Scored> = if threads <= 1 {
            part().into_vec()
        } else {
            std::thread::scope(|s| {
                let helpers: Vec<_> = (1..threads)
                    .filter_map(|_| {
                        std::thread::Builder::new()
                            .name("memstrata-scan".into())
                            .spawn_scoped(s, part)
                            .ok()
                    })
                    .collect();
                let mut kept = part().into_vec();
                for h in helpers {
                    match h.join() {
                        Ok(heap) => kept.extend(heap.into_vec()),
                        Err(payload) => std::panic::resume_unwind(payload),
                    }
                }
                kept
            })
        };
        best_first(kept, depth)
    }

    /// One thread's share: blocks taken from `next` until none is left.
    fn part(&self, depth: usize, next: &AtomicUsize) -> BinaryHeap<Scored> {
        let dim = self.dim;
        let block_len = SCAN_BLOCK * dim;
        let blocks = self.codes.len().div_ceil(block_len);
        let mut heap: BinaryHeap<Scored> = BinaryHeap::with_capacity(depth + 1);
        let mut dots = Vec::with_capacity(SCAN_BLOCK);
        loop {
            let b = next.fetch_add(1, Ordering::Relaxed);
            if b >= blocks {
                return heap;
            }
            let block = &self.codes[b * block_len..((b + 1) * block_len).min(self.codes.len())];
            dot_rows(self.qc, block, dim, &mut dots);
            for (j, d) in dots.iter().enumerate() {
                let i = b * SCAN_BLOCK + j;
                if self.accept.is_some_and(|a| !a(i)) {
                    continue;
                }
                let s = *d as f32 * self.qs * self.scales[i];
                if heap.len() < depth {
                    heap.push(Scored(s, i));
                } else if heap.peek().is_some_and(|w| s > w.0) {
                    heap.pop();
                    heap.push(Scored(s, i));
                }
            }
        }
    }
}

/// The `depth` best of `kept`, best first (ties: the lower row).
fn best_first(mut kept: Vec<Scored>, depth: usize) -> Vec<(usize, f32)> {
    kept.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    kept.truncate(depth);
    kept.into_iter().map(|Scored(s, i)| (i, s)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_build_of_the_scan_gives_the_plain_integer_dot_product() {
        // The run-time pick of `dot_rows` (AVX-512BW, AVX2, SSE4.1 or baseline
        // here) against a scalar sum, codes at both ends of the range, for
        // dimensions with and without a remainder past the 16/32/64-byte chunks.
        let mut state = 0x2545_f491_u32;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            ((state % 255) as i32 - 127) as i8
        };
        for dim in [1, 15, 16, 17, 31, 33, 63, 64, 65, 384, 385] {
            let rows = 40;
            let mut codes: Vec<i8> = (0..rows * dim).map(|_| next()).collect();
            let mut q: Vec<i8> = (0..dim).map(|_| next()).collect();
            // Extremes: a row and the query at ±127.
            codes[..dim].fill(127);
            codes[dim..2 * dim].fill(-127);
            q[0] = -127;
            let mut out = Vec::new();
            dot_rows(&q, &codes, dim, &mut out);
            let want: Vec<i32> = codes
                .chunks_exact(dim)
                .map(|r| {
                    r.iter()
                        .zip(&q)
                        .map(|(a, b)| i32::from(*a) * i32::from(*b))
                        .sum()
                })
                .collect();
            assert_eq!(out, want, "dim {dim}");
            for (row, w) in codes.chunks_exact(dim).zip(&want) {
                assert_eq!(dot_i8(&q, row), *w, "dim {dim}");
                assert_eq!(dot_i8_wide(&q, row), *w, "dim {dim}");
            }
        }
    }

    #[test]
    fn a_scan_shared_among_threads_and_callers_gives_the_one_thread_result() {
        // Enough rows for several threads and blocks; many equal scores (few
        // distinct codes), so the tie rule decides which rows are kept.
        let dim = 64;
        let rows = 3 * BYTES_PER_THREAD / dim + 77;
        let codes: Vec<i8> = (0..rows * dim)
            .map(|i| ((i * 7919 / dim) % 5) as i8 - 2)
            .collect();
        let scales: Vec<f32> = (0..rows).map(|i| 1.0 + (i % 3) as f32).collect();
        let q: Vec<i8> = (0..dim).map(|i| (i % 3) as i8 - 1).collect();
        assert!(
            scan_threads(codes.len()) > 1
                || std::thread::available_parallelism().map_or(1, |n| n.get()) == 1
        );
        let accept = |i: usize| !i.is_multiple_of(11);
        let m = Matrix {
            codes: &codes,
            scales: &scales,
            dim,
            qc: &q,
            qs: 0.5,
            accept: Some(&accept),
        };
        let got = m.top(100);
        let mut want: Vec<(usize, f32)> = codes
            .chunks_exact(dim)
            .enumerate()
            .filter(|(i, _)| accept(*i))
            .map(|(i, r)| {
                let d: i32 = r
                    .iter()
                    .zip(&q)
                    .map(|(a, b)| i32::from(*a) * i32::from(*b))
                    .sum();
                (i, d as f32 * 0.5 * scales[i])
            })
            .collect();
        want.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        want.truncate(100);
        assert_eq!(got, want);
        // Two callers sharing one block counter (a leading scan and one that
        // joins it): their merged tops are the whole matrix's.
        let next = AtomicUsize::new(0);
        let (a, b) = std::thread::scope(|s| {
            let other = s.spawn(|| m.top_from(100, &next, 1));
            let mine = m.top_from(100, &next, 1);
            (other.join().unwrap(), mine)
        });
        let merged: Vec<Scored> = a.into_iter().chain(b).map(|(i, s)| Scored(s, i)).collect();
        assert_eq!(best_first(merged, 100), want);
        // A caller that comes when every block is taken gets none.
        assert!(m.top_from(100, &next, 2).is_empty());
        // Fewer rows than asked for: every accepted row, best first.
        let few = Matrix {
            codes: &codes[..10 * dim],
            scales: &scales[..10],
            ..m
        };
        assert_eq!(few.top(100).len(), 9);
    }
}
