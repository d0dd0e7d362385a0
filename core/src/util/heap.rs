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
pub(crate) fn release_free_memory() {
    collect_deferred(EPOCH_COLLECT_ROUNDS);
    trim();
}

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
