//! Giving freed heap back to the operating system after an engine closes.
//!
//! An engine's threads (the caller's, the maintenance thread, tantivy's
//! indexing thread, sled's flusher) allocate and free many small blocks while
//! it runs: decoded records, sled's page fragments and node rewrites, index
//! documents. glibc's allocator keeps what is freed in its arenas for reuse,
//! so after `close()` most of that memory is free but still resident: the
//! footprint probe (`benches/footprint/probe.py`, docs/benchmarks/footprint.md)
//! measured +926 MiB still resident after closing a store that had just
//! ingested 100k short episodes, and +508 MiB after `malloc_trim(0)`; with
//! this call in the close path the engine gives that back itself.
//!
//! While a store is written, the maintenance thread does the same every
//! `Options::release_memory_interval` ([`release_free_heap`]), and every
//! indexed write runs a round of epoch collection ([`collect_deferred`]), so
//! that an unbounded ingest stays near its live heap.
//!
//! glibc also raises its trim threshold to twice the largest block it ever
//! unmapped (sled's and tantivy's multi-MiB buffers), and `malloc_trim` does
//! not trim the tops of the arenas of threads other than the main one, so
//! those tops stay resident up to that threshold, in each of the engine
//! threads' arenas: [`fix_malloc_thresholds`] keeps glibc's default
//! thresholds fixed instead (measured: after `close()` 34–43 MiB of a 100k
//! short-episode ingest stayed, 19–20 MiB with it; the peak 110–118 MiB,
//! 69–87 MiB with it).
//!
//! Only glibc (`target_env = "gnu"`) on Linux has `malloc_trim`; elsewhere
//! this does nothing (musl, macOS and Windows allocators return memory on
//! their own terms).
#![allow(unsafe_code)]

/// Rounds of [`release_free_memory`]'s epoch collection (each frees a few
/// bags of deferred garbage).
const EPOCH_COLLECT_ROUNDS: usize = 256;

/// Free what sled deferred, then return free heap pages of every malloc arena
/// to the operating system.
///
/// sled frees replaced pages and nodes through crossbeam-epoch: they wait in a
/// process-wide queue until some thread pins the epoch again. After the last
/// store closes nothing pins, so that garbage (tens of MiB after a short
/// ingest) would stay allocated for the life of the process. Pinning and
/// flushing here advances the epoch and collects it; no guard of a closed
/// store is alive, and other open stores are unaffected (collection only frees
/// what no pinned thread can still see).
///
/// With `last` (no other store of this process is open), sled's I/O threads
/// are ended first: they outlive every store, and each keeps a thread cache
/// of freed chunks (glibc's tcache, up to 7 per size class) that pins the
/// heap pages around them, and an epoch bag of deferred garbage. Ending them
/// hands both back; the next store's first write starts them again.
pub(crate) fn release_free_memory(last: bool) {
    if last {
        sled::release_io_threads(IO_THREADS_EXIT_WAIT);
    }
    collect_deferred(EPOCH_COLLECT_ROUNDS);
    refill_thread_cache();
    trim();
}

/// How long closing waits for sled's I/O threads to end (they end as soon as
/// their current task does; with another store still writing they may not).
const IO_THREADS_EXIT_WAIT: std::time::Duration = std::time::Duration::from_millis(200);

/// During writes (the maintenance thread, every
/// `Options::release_memory_interval`): collect what sled deferred, a few
/// rounds, then return the arenas' free pages (see [`trim`]).
pub(crate) fn release_free_heap() {
    collect_deferred(RELEASE_COLLECT_ROUNDS);
    trim();
}

/// Rounds of [`release_free_heap`]'s epoch collection.
const RELEASE_COLLECT_ROUNDS: usize = 8;

/// Return free heap pages of every malloc arena to the operating system
/// (glibc's `malloc_trim(0)`: whole free pages inside the heaps too, not only
/// at their tops). It frees nothing that is allocated; it costs a walk of
/// each arena's free chunks under that arena's lock, a few milliseconds for
/// the ~100 MiB of fragmented heap an ingest leaves.
fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` takes a padding size and only releases memory the
    // allocator already holds as free; it touches no live allocation and is
    // thread-safe (it takes each arena's lock in turn).
    unsafe {
        libc::malloc_trim(0);
    }
}

/// glibc's thread cache (tcache): 64 bins, for chunks of 32 to 1,040 bytes
/// (requests of up to 1,032), each holding up to 7 freed chunks by default.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const TCACHE_BINS: usize = 64;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const TCACHE_COUNT: usize = 7;

/// Swap the calling thread's cache of freed chunks for fresh ones, so that
/// [`trim`] can release the pages the old ones sat on.
///
/// glibc keeps each thread's last freed small chunks (up to 7 per size
/// class) in a cache of its own; to the arena they are in use, so
/// `malloc_trim` cannot release the pages they lie on. The thread that
/// closes a store is usually the one that wrote to it, and its last frees
/// lie scattered over the heap the ingest used: after 100k short episodes
/// written in batches, ~300 pages (1.2 MiB) of the main heap held nothing
/// but such chunks after `close()`. This takes every cached chunk out
/// (7 allocations per class), allocates 7 more per class, which glibc
/// mostly carves next to one another, frees those first (they fill the
/// cache again) and then the old ones, which the cache no longer takes: they
/// go back to the arena, where [`trim`] releases their pages. Measured after
/// a batched 100k ingest: 295–348 → 132–148 pages of the main heap newly
/// resident after `close()` (docs/benchmarks/footprint.md, sixteenth pass).
///
/// glibc may serve a request from a chunk of the next class up (when the
/// rest of a free chunk would be too small to split off); freed, such a
/// chunk lands in that class's cache, not the one it was asked for, and
/// would leave a slot for an old chunk. So a fresh chunk counts only when
/// its usable size is its class's own; the others (at most 7 per class) are
/// freed last, after the old ones, when every cache is full again.
/// Around 900–1,300 allocations and frees, tens of microseconds; if the
/// application changed the cache's size (`glibc.malloc.tcache_count`), less
/// is swapped, never anything lost. A no-op without glibc.
fn refill_thread_cache() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        const N: usize = TCACHE_BINS * TCACHE_COUNT;
        let mut old = [std::ptr::null_mut::<libc::c_void>(); N];
        let mut fresh = [std::ptr::null_mut::<libc::c_void>(); N];
        let mut larger = [std::ptr::null_mut::<libc::c_void>(); N];
        // SAFETY: plain `malloc`/`free` pairs: every pointer is freed exactly
        // once, by this function, and only passed to `malloc_usable_size`
        // while allocated, never dereferenced; `free` of a null pointer (a
        // failed allocation, or a slot left empty) does nothing. `black_box`
        // keeps the compiler from removing the pairs as unused allocations.
        unsafe {
            for (k, p) in old.iter_mut().enumerate() {
                *p = std::hint::black_box(libc::malloc(tcache_request(k / TCACHE_COUNT)));
            }
            for class in 0..TCACHE_BINS {
                let size = tcache_request(class);
                let slots = class * TCACHE_COUNT..(class + 1) * TCACHE_COUNT;
                let (mut exact, mut other) = (slots.start, slots.start);
                while exact < slots.end && other < slots.end {
                    let p = std::hint::black_box(libc::malloc(size));
                    if p.is_null() {
                        break;
                    }
                    if libc::malloc_usable_size(p) == size {
                        fresh[exact] = p;
                        exact += 1;
                    } else {
                        larger[other] = p;
                        other += 1;
                    }
                }
            }
            for p in fresh.into_iter().chain(old).chain(larger) {
                libc::free(p);
            }
        }
    }
}

/// The largest request glibc serves from a chunk of tcache class `class`
/// (chunks of 32 + 16 × `class` bytes, 8 of them header): also that chunk's
/// usable size (`malloc_usable_size`).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const fn tcache_request(class: usize) -> usize {
    24 + 16 * class
}

/// The environment variables through which an application sets glibc's
/// malloc thresholds itself; when one is set (or `GLIBC_TUNABLES` names a
/// `glibc.malloc.` tunable), [`fix_malloc_thresholds`] leaves the allocator
/// alone.
const MALLOC_ENV: [&str; 3] = [
    "MALLOC_TRIM_THRESHOLD_",
    "MALLOC_MMAP_THRESHOLD_",
    "MALLOC_TOP_PAD_",
];

/// Whether the application tuned glibc's malloc through its environment.
fn malloc_tuned_by_env() -> bool {
    malloc_env_sets(&MALLOC_ENV, "glibc.malloc.")
}

/// Whether one of `vars` is set, or `GLIBC_TUNABLES` names `tunable`.
fn malloc_env_sets(vars: &[&str], tunable: &str) -> bool {
    vars.iter().any(|k| std::env::var_os(k).is_some())
        || std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains(tunable))
}

/// glibc's default trim and mmap thresholds (128 KiB).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MALLOC_DEFAULT_THRESHOLD: libc::c_int = 128 * 1024;

/// Keep glibc's trim and mmap thresholds at their defaults for the life of
/// the process, once, when the first engine opens with
/// `Options::release_memory_interval` on (and unless the application set
/// them through its environment, [`MALLOC_ENV`]).
///
/// glibc's "dynamic" thresholds rise the first time a large mmapped block is
/// freed: the mmap threshold to that block's size, the trim threshold to
/// twice it (sled's 8 MiB I/O buffers make it 16 MiB). From then on a free
/// at the top of an arena only returns memory when the top exceeds that
/// threshold, and `malloc_trim` never trims the tops of non-main arenas, so
/// every engine thread's arena keeps up to 16 MiB resident after the store
/// closes. Fixing the thresholds is what `mallopt(M_TRIM_THRESHOLD, …)`
/// does; the values are glibc's own defaults, so blocks over 128 KiB are
/// mapped and unmapped as glibc does before its first adjustment.
///
/// It also sets `M_TOP_PAD` to 0 (glibc's default pads every heap extension
/// and keeps that much at each arena's top by 128 KiB): the tops of the ended
/// engine threads' arenas, which `malloc_trim` does not trim, then keep only
/// what is in use. Measured after a 100k short-episode ingest, one record per
/// call: those tops 1.9–2.5 → 0.5–0.8 MiB, CPU per episode unchanged.
/// Process-wide, like `malloc_trim`; a no-op without glibc.
pub(crate) fn fix_malloc_thresholds() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if malloc_tuned_by_env() {
            return;
        }
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        // SAFETY: `mallopt` sets allocator parameters under glibc's own lock;
        // these three take effect for later allocations and frees only.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, MALLOC_DEFAULT_THRESHOLD);
            libc::mallopt(libc::M_TRIM_THRESHOLD, MALLOC_DEFAULT_THRESHOLD);
            libc::mallopt(libc::M_TOP_PAD, 0);
        }
    });
}

/// Cap the malloc arenas glibc may create in this process at `arenas`
/// (`mallopt(M_ARENA_MAX)`; see `Options::malloc_arena_max`), or at the
/// smallest cap an earlier store asked for, unless the application set the
/// limit itself (`MALLOC_ARENA_MAX`, or `glibc.malloc.arena_max` in
/// `GLIBC_TUNABLES`).
///
/// glibc gives each allocating thread an arena of its own, up to eight per
/// CPU: the caller's, the maintenance thread, tantivy's indexing thread (a new
/// one per segment) and merge threads, sled's flusher and I/O threads. Each
/// arena keeps its own free and fragmented pages between trims, so with few
/// arenas the same ingest holds less. Arenas that exist already stay; threads
/// created later share the capped set. Process-wide; a no-op without glibc.
pub(crate) fn cap_malloc_arenas(arenas: usize) {
    static CAP: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(usize::MAX);
    let before = CAP.fetch_min(arenas, std::sync::atomic::Ordering::AcqRel);
    if arenas >= before || malloc_env_sets(&["MALLOC_ARENA_MAX"], "glibc.malloc.arena_max") {
        return;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt` sets an allocator parameter under glibc's own lock;
    // M_ARENA_MAX only limits the creation of later arenas.
    unsafe {
        libc::mallopt(
            libc::M_ARENA_MAX,
            libc::c_int::try_from(arenas).unwrap_or(libc::c_int::MAX),
        );
    }
}

/// Advance the epoch and free what sled deferred, `rounds` times (each round
/// pins this thread, moves its own deferred objects to the global queue and
/// frees up to 8 bags of 64 objects whose epoch has passed).
///
/// crossbeam-epoch only collects on every 128th pin of a thread, 8 bags at a
/// time, so a burst of replaced sled nodes (a pruning batch, see
/// `Engine::prune_index_log`) otherwise stays allocated for a while after it.
pub(crate) fn collect_deferred(rounds: usize) {
    for _ in 0..rounds {
        let guard = sled::crossbeam_pin();
        guard.flush();
    }
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::{TCACHE_COUNT, tcache_request};

    /// A chunk of its class's own size, freed by this thread while that
    /// class's cache has room, is handed out again by the next allocation of
    /// that size (glibc's cache is last in, first out), unless
    /// `refill_thread_cache` ran in between: then the cache holds fresh
    /// chunks, and the old one went back to the arena, where a trim can
    /// release its page.
    ///
    /// What this thread freed before the test is unknown, so the test first
    /// fills the class's cache with chunks of its own size (freeing 7 fills
    /// it whatever it held) and takes them all out again (7 allocations, each
    /// served by the cache): it is then empty. Every step after is the
    /// cache's own behaviour, which no other thread touches.
    #[test]
    fn refill_hands_the_cached_chunks_back_to_the_arena() {
        let size = tcache_request(5);
        // SAFETY: malloc/free pairs, each pointer freed once; the pointers
        // are only compared and passed to `malloc_usable_size` while
        // allocated.
        unsafe {
            let chunks: Vec<_> = (0..64)
                .map(|_| std::hint::black_box(libc::malloc(size)))
                .collect();
            // glibc may serve a request from a chunk of the next class up;
            // such a chunk would be cached in that class when freed.
            let (exact, larger): (Vec<_>, Vec<_>) = chunks
                .into_iter()
                .partition(|&p| libc::malloc_usable_size(p) == size);
            assert!(
                exact.len() > TCACHE_COUNT,
                "{} of 64 chunks of the class's own size",
                exact.len()
            );
            let (x, fill) = (exact[0], &exact[1..=TCACHE_COUNT]);
            for &p in exact[TCACHE_COUNT + 1..].iter().chain(&larger) {
                libc::free(p);
            }
            for &p in fill {
                libc::free(p);
            }
            let emptied: Vec<_> = (0..TCACHE_COUNT)
                .map(|_| std::hint::black_box(libc::malloc(size)))
                .collect();

            libc::free(x);
            let again = std::hint::black_box(libc::malloc(size));
            assert_eq!(again, x, "glibc reuses the chunk freed last");
            libc::free(again);

            super::refill_thread_cache();
            let after = std::hint::black_box(libc::malloc(size));
            assert_ne!(after, x, "the cached chunk left the thread cache");
            libc::free(after);
            for p in emptied {
                libc::free(p);
            }
        }
    }
}
