//! A bounded cache of decoded records, keyed by their storage key (`ctx 0x00 id`).
//! One generic type serves two layers: decoded episodes ([`EpisodeCache`]) and
//! decoded short-term records ([`ShortTermCache`]).
//!
//! The store stays the source of truth: every path that removes or replaces a
//! record of the cached tree calls [`DecodedCache::invalidate`] after its
//! store write, and fills that could race with such a write are refused through
//! a generation counter:
//!
//! 1. a reader takes [`DecodedCache::generation`] *before* it reads the store;
//! 2. a writer commits to the store, then invalidates (removing the entry and
//!    bumping the generation under the shard lock);
//! 3. the reader's [`DecodedCache::insert`] is refused when the generation moved.
//!
//! If the reader saw the old record, its store read came before the writer's
//! commit, hence its generation load came before the bump: either its insert
//! sees the new generation and is refused, or it lands before the
//! invalidation, which then removes it. The generation is global (one bump
//! refuses every fill in flight), which only costs a few misses.
//!
//! Write-through (inserting what was just written) is only safe when no other
//! writer can replace the same key concurrently: episodes get fresh ids, so
//! `record` writes through; short-term keys are overwritten by any caller, so
//! `store` only invalidates and the next read fills.
//!
//! Bounded by an estimate of the decoded size in bytes, CLOCK eviction
//! (second chance), sharded to keep concurrent readers off one lock. Disabled
//! (budget 0) on a shared PostgreSQL store, whose rows other instances write.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;
use rustc_hash::FxBuildHasher;
use serde_json::Value;
use smallvec::SmallVec;

// The budgets are `Options::episode_cache_bytes` (default 8 MiB) and
// `Options::short_term_cache_bytes` (default 16 MiB). The short-term one is
// larger: the short-term layer is the one agents re-read most, its records are
// small (packed, ~300 bytes for a 4-field value plus ~130 of bookkeeping, so
// ~39k of them fit; ~16k when they were cached as decoded `Value`s), and a miss
// costs a store read, a decode and an eviction, which at 8 MiB (~87 % of a 10k
// working set) made the average retrieve no faster than without a cache
// (docs/benchmarks/short-term.md, *Findings*).

/// A cached record's estimated heap footprint in bytes.
pub(crate) trait Weigh {
    fn approx_size(&self) -> usize;
}

/// Short-term records, timestamps and value, packed into one block each
/// (`short_term::pack`; the value as a `value_tape`) rather than a decoded
/// `StRecord`: a hit builds the caller's `Value` from one contiguous block.
pub(crate) type ShortTermCache = DecodedCache<[u8]>;

/// A storage key held inline in the map and the CLOCK queue: a lookup compares
/// it where the hash table's slot is, with no pointer to follow (`ctx 0x00 key`
/// of the default context and a key of up to 24 bytes; longer keys spill to
/// the heap).
type Key = SmallVec<[u8; 32]>;

/// Records larger than this share of a shard's budget are not cached.
const MAX_ENTRY_SHARE: usize = 4;

const SHARDS: usize = 16;

/// Doorkeeper slots per shard (8 bytes each).
const DOOR_SLOTS: usize = 1024;

struct Slot<V: ?Sized> {
    rec: Arc<V>,
    bytes: usize,
    referenced: AtomicBool,
}

struct Shard<V: ?Sized> {
    /// Fx hashing: keys are short and come from the engine, not from an attacker
    /// who could aim collisions at one shard (they are also bounded by the budget).
    map: HashMap<Key, Slot<V>, FxBuildHasher>,
    /// CLOCK order (a copy of the map's key); may hold keys already
    /// removed from `map` (skipped on eviction).
    order: VecDeque<Key>,
    bytes: usize,
    /// Admission doorkeeper, used once the shard is full: the hashes of keys
    /// refused once (direct-mapped). A key is admitted on its second fill, so
    /// a working set larger than the cache (reads spread over far more keys
    /// than fit) does not pay an insertion and an eviction on every miss.
    door: Box<[u64]>,
}

impl<V: ?Sized> Default for Shard<V> {
    fn default() -> Self {
        Shard {
            map: HashMap::default(),
            order: VecDeque::new(),
            bytes: 0,
            door: vec![0; DOOR_SLOTS].into_boxed_slice(),
        }
    }
}

impl<V: ?Sized> Shard<V> {
    fn evict_to(&mut self, budget: usize) {
        while self.bytes > budget {
            let Some(k) = self.order.pop_front() else {
                break;
            };
            let keep = match self.map.get(k.as_slice()) {
                Some(s) => s.referenced.swap(false, Ordering::Relaxed),
                None => continue,
            };
            if keep {
                self.order.push_back(k);
            } else if let Some(s) = self.map.remove(k.as_slice()) {
                self.bytes -= s.bytes;
            }
        }
        // Drop stale keys left by invalidations so `order` stays bounded.
        if self.order.len() > 2 * self.map.len() + 64 {
            let map = &self.map;
            self.order.retain(|k| map.contains_key(k.as_slice()));
        }
    }
}

/// See the module documentation.
pub(crate) struct DecodedCache<V: ?Sized> {
    shards: Box<[Mutex<Shard<V>>]>,
    shard_budget: usize,
    generation: AtomicU64,
}

impl<V: ?Sized> std::fmt::Debug for DecodedCache<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DecodedCache")
            .field("budget", &(self.shard_budget * SHARDS))
            .finish_non_exhaustive()
    }
}

fn shard_of(key: &[u8]) -> usize {
    // FNV-1a: cheap, and keys are short.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h % SHARDS as u64) as usize
}

impl<V: Weigh + ?Sized> DecodedCache<V> {
    /// A cache holding at most about `budget` bytes of decoded records (0 disables it).
    pub(crate) fn new(budget: usize) -> Self {
        DecodedCache {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            shard_budget: budget / SHARDS,
            generation: AtomicU64::new(0),
        }
    }

    /// Take this before reading sled for a later [`DecodedCache::insert`].
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The cached record under `key`.
    pub(crate) fn get(&self, key: &[u8]) -> Option<Arc<V>> {
        if self.shard_budget == 0 {
            return None;
        }
        let shard = self.shards[shard_of(key)].lock();
        shard.map.get(key).map(|s| {
            s.referenced.store(true, Ordering::Relaxed);
            Arc::clone(&s.rec)
        })
    }

    /// The record under `key`: cached, else `load`ed from the store (decoded) and
    /// offered to the cache under the generation taken before the load.
    pub(crate) fn get_or_load(
        &self,
        key: &[u8],
        load: impl FnOnce() -> crate::Result<Option<V>>,
    ) -> crate::Result<Option<Arc<V>>>
    where
        V: Sized,
    {
        if let Some(rec) = self.get(key) {
            return Ok(Some(rec));
        }
        // Taken before the store read: a fill racing an invalidation is refused.
        let generation = self.generation();
        Ok(load()?.map(|rec| {
            let rec = Arc::new(rec);
            self.insert(key, Arc::clone(&rec), generation);
            rec
        }))
    }

    /// Cache `rec` (read from the store, or just written to it) under `key`,
    /// unless an invalidation happened since `generation` was taken.
    pub(crate) fn insert(&self, key: &[u8], rec: Arc<V>, generation: u64) {
        let size = rec.approx_size();
        self.insert_with(key, size, generation, || Some(rec));
    }

    /// [`DecodedCache::insert`] of a record built by `make` only once the cache
    /// admits it (estimated at `size` bytes): a refused fill (too large, the
    /// generation moved, refused by the doorkeeper) costs no build. `make`
    /// runs under the shard lock; `None` from it caches nothing.
    pub(crate) fn insert_with(
        &self,
        key: &[u8],
        size: usize,
        generation: u64,
        make: impl FnOnce() -> Option<Arc<V>>,
    ) {
        if self.shard_budget == 0 {
            return;
        }
        let bytes = size + key.len() + SLOT_OVERHEAD;
        if bytes > self.shard_budget / MAX_ENTRY_SHARE {
            return;
        }
        let mut shard = self.shards[shard_of(key)].lock();
        // Checked under the shard lock: an invalidation of this key either bumped the
        // generation before this point (refused here) or runs after (and removes it).
        if self.generation.load(Ordering::Acquire) != generation {
            return;
        }
        let replaces = shard.map.contains_key(key);
        if !replaces && shard.bytes + bytes > self.shard_budget {
            // Full: admit only a key refused before (see `Shard::door`).
            let h = std::hash::BuildHasher::hash_one(&FxBuildHasher, key) | 1;
            let slot = &mut shard.door[(h % DOOR_SLOTS as u64) as usize];
            if *slot != h {
                *slot = h;
                return;
            }
            *slot = 0;
        }
        let Some(rec) = make() else {
            return;
        };
        let slot = Slot {
            rec,
            bytes,
            referenced: AtomicBool::new(false),
        };
        if let Some(old) = shard.map.get_mut(key) {
            let old = std::mem::replace(old, slot);
            shard.bytes -= old.bytes;
        } else {
            let k = Key::from_slice(key);
            shard.map.insert(k.clone(), slot);
            shard.order.push_back(k);
        }
        shard.bytes += bytes;
        let budget = self.shard_budget;
        shard.evict_to(budget);
    }

    /// Forget `key`; call after every store write that removes or replaces it.
    pub(crate) fn invalidate(&self, key: &[u8]) {
        if self.shard_budget == 0 {
            return;
        }
        let mut shard = self.shards[shard_of(key)].lock();
        // Bumped under the lock, so an `insert` of this key that checks the
        // generation after this point refuses.
        self.generation.fetch_add(1, Ordering::AcqRel);
        if let Some(s) = shard.map.remove(key) {
            shard.bytes -= s.bytes;
        }
    }

    /// Forget everything.
    #[allow(dead_code)]
    pub(crate) fn clear(&self) {
        for s in self.shards.iter() {
            let mut s = s.lock();
            self.generation.fetch_add(1, Ordering::AcqRel);
            s.map.clear();
            s.order.clear();
            s.bytes = 0;
        }
    }

    /// The byte budget (0: disabled).
    pub(crate) fn budget(&self) -> usize {
        self.shard_budget * SHARDS
    }

    /// Entries and estimated bytes held (for tests and diagnostics).
    pub(crate) fn usage(&self) -> (usize, usize) {
        self.shards.iter().fold((0, 0), |(n, b), s| {
            let s = s.lock();
            (n + s.map.len(), b + s.bytes)
        })
    }
}

/// Per-entry bookkeeping counted against the budget: the map slot with its
/// inline key, the key's CLOCK copy, the `Arc` header.
const SLOT_OVERHEAD: usize = 96;

/// Rough heap footprint of a JSON value.
pub(crate) fn value_size(v: &Value) -> usize {
    const NODE: usize = 48;
    match v {
        Value::Null | Value::Bool(_) | Value::Number(_) => NODE,
        Value::String(s) => NODE + s.len(),
        Value::Array(a) => NODE + a.iter().map(value_size).sum::<usize>(),
        Value::Object(m) => {
            NODE + m
                .iter()
                .map(|(k, v)| NODE + k.len() + value_size(v))
                .sum::<usize>()
        }
    }
}

/// A packed short-term record: its length.
impl Weigh for [u8] {
    fn approx_size(&self) -> usize {
        self.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::episodic::{Episode, EpisodeCache};

    fn ep(id: &str, summary: &str) -> Arc<Episode> {
        Arc::new(Episode {
            id: id.into(),
            timestamp: chrono::DateTime::from_timestamp_millis(0).expect("ts"),
            summary: summary.into(),
            content: Value::Null,
            participants: vec![],
            tags: vec![],
            importance: 5,
            seen_count: 1,
            last_seen: None,
            duplicate_of: None,
            recorded_at: chrono::DateTime::from_timestamp_millis(0).expect("ts"),
        })
    }

    #[test]
    fn insert_get_invalidate() {
        let c = EpisodeCache::new(1 << 20);
        let g = c.generation();
        c.insert(b"a\0x", ep("x", "one"), g);
        assert_eq!(c.get(b"a\0x").expect("cached").summary, "one");
        c.invalidate(b"a\0x");
        assert!(c.get(b"a\0x").is_none());
    }

    #[test]
    fn fill_racing_an_invalidation_is_refused() {
        let c = EpisodeCache::new(1 << 20);
        let g = c.generation();
        // A writer removes/replaces the episode between the reader's sled read and its fill.
        c.invalidate(b"a\0x");
        c.insert(b"a\0x", ep("x", "stale"), g);
        assert!(c.get(b"a\0x").is_none());
    }

    #[test]
    fn bounded_by_bytes() {
        let c = EpisodeCache::new(64 * 1024);
        for i in 0..10_000 {
            let k = format!("a\0{i}");
            c.insert(
                k.as_bytes(),
                ep(&i.to_string(), &"s".repeat(100)),
                c.generation(),
            );
        }
        let (n, bytes) = c.usage();
        assert!(bytes <= 64 * 1024, "{bytes}");
        assert!(n > 0);
        for s in c.shards.iter() {
            let s = s.lock();
            assert!(s.order.len() <= 2 * s.map.len() + 64);
        }
    }

    #[test]
    fn full_cache_admits_a_key_on_its_second_fill() {
        let c = EpisodeCache::new(64 * 1024);
        for i in 0..2_000 {
            let k = format!("a\0{i}");
            c.insert(
                k.as_bytes(),
                ep(&i.to_string(), &"s".repeat(100)),
                c.generation(),
            );
        }
        let (n, _) = c.usage();
        // Every shard is full now; a new key is refused once, then admitted.
        let mut admitted_second_time = 0;
        for i in 0..50 {
            let k = format!("b\0{i}");
            c.insert(k.as_bytes(), ep("n", "new"), c.generation());
            let first = c.get(k.as_bytes()).is_some();
            c.insert(k.as_bytes(), ep("n", "new"), c.generation());
            let second = c.get(k.as_bytes()).is_some();
            // Admitted at once while its shard has room, else on the second fill.
            assert!(second, "b\\0{i}");
            admitted_second_time += usize::from(!first);
        }
        assert!(admitted_second_time > 0, "no shard was full");
        assert!(c.usage().0 <= n + 50);
        assert!(c.usage().1 <= 64 * 1024);
    }

    #[test]
    fn disabled_when_zero() {
        let c = EpisodeCache::new(0);
        c.insert(b"a\0x", ep("x", "one"), c.generation());
        assert!(c.get(b"a\0x").is_none());
    }
}
