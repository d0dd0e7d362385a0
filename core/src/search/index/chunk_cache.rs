//! The bounded cache of decrypted index data (`Options::index_cache_bytes`).
//!
//! A sealed index file is decrypted in chunks (`crypt`): a read inside one
//! chunk is served as a slice of the cached chunk (no copy), a read spanning
//! several chunks as one cached buffer of exactly that range (tantivy
//! re-reads the same ranges: fast-field columns and field norms each time a
//! reader is reloaded, a frequent term's postings on every search). Least
//! recently used entries go first once the decrypted bytes exceed the budget;
//! a budget of 0 caches nothing (every read decrypts).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use lru::LruCache;
use parking_lot::Mutex;

/// What a cached buffer holds: chunk `n` of file `id`, or the bytes
/// `start..end` of file `id`. File ids come from [`super::crypt::Sealer`]:
/// one per (file name, random salt) pair, so a rewritten or replaced file
/// never hits another file's entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Key {
    Chunk { id: u32, n: u64 },
    Range { id: u32, start: u64, end: u64 },
}

#[derive(Debug)]
struct Entries {
    lru: LruCache<Key, Arc<[u8]>>,
    bytes: usize,
}

/// Decrypted index chunks and ranges, bounded in bytes.
#[derive(Debug)]
pub(super) struct ChunkCache {
    budget: usize,
    entries: Mutex<Entries>,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl ChunkCache {
    pub(super) fn new(budget: usize) -> Self {
        ChunkCache {
            budget,
            entries: Mutex::new(Entries {
                lru: LruCache::unbounded(),
                bytes: 0,
            }),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    pub(super) fn get(&self, key: &Key) -> Option<Arc<[u8]>> {
        if self.budget == 0 {
            return None;
        }
        let found = self.entries.lock().lru.get(key).cloned();
        let counter = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// Whether an entry of `len` bytes would be kept (a quarter of the budget
    /// at most, so that one large range cannot flush everything else).
    pub(super) fn admits(&self, len: usize) -> bool {
        len <= self.budget / 4
    }

    pub(super) fn insert(&self, key: Key, value: Arc<[u8]>) {
        if !self.admits(value.len()) {
            return;
        }
        let mut e = self.entries.lock();
        e.bytes += value.len();
        if let Some(old) = e.lru.put(key, value) {
            e.bytes -= old.len();
        }
        while e.bytes > self.budget {
            match e.lru.pop_lru() {
                Some((_, v)) => e.bytes -= v.len(),
                None => break,
            }
        }
    }

    /// (hits, misses, bytes held).
    #[cfg(test)]
    pub(super) fn stats(&self) -> (u64, u64, usize) {
        (
            self.hits.load(Ordering::Relaxed),
            self.misses.load(Ordering::Relaxed),
            self.entries.lock().bytes,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buf(n: usize) -> Arc<[u8]> {
        vec![7u8; n].into()
    }

    #[test]
    fn bounded_in_bytes_least_recently_used_first() {
        let c = ChunkCache::new(400);
        for n in 0..4 {
            c.insert(Key::Chunk { id: 1, n }, buf(100));
        }
        assert!(c.get(&Key::Chunk { id: 1, n: 0 }).is_some()); // now most recent
        c.insert(Key::Chunk { id: 1, n: 9 }, buf(100));
        assert!(c.get(&Key::Chunk { id: 1, n: 1 }).is_none());
        assert!(c.get(&Key::Chunk { id: 1, n: 0 }).is_some());
        assert_eq!(c.stats().2, 400);
        // Larger than a quarter of the budget: not kept.
        c.insert(
            Key::Range {
                id: 2,
                start: 0,
                end: 101,
            },
            buf(101),
        );
        assert!(
            c.get(&Key::Range {
                id: 2,
                start: 0,
                end: 101
            })
            .is_none()
        );
        let off = ChunkCache::new(0);
        off.insert(Key::Chunk { id: 1, n: 0 }, buf(0));
        assert!(off.get(&Key::Chunk { id: 1, n: 0 }).is_none());
    }
}
