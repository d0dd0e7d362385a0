//! The engines under comparison, each behind one small trait.
//!
//! - [`KvEngine`]: the short-term floor (Memstrata `short_term` vs raw sled on the same bytes).
//! - [`SearchEngine`]: episodes (Memstrata `episodic` vs raw tantivy vs SQLite FTS5), same
//!   documents, same natural-language queries, top 10 with each hit's document decoded.

use serde_json::Value;
use std::path::Path;

use crate::corpus::EpisodeDoc;
use crate::stats::Latency;

pub mod fts5;
pub mod memstrata_engine;
pub mod sled_raw;
pub mod tantivy_raw;

/// Errors from any engine.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
/// Result with [`BoxError`].
pub type Result<T> = std::result::Result<T, BoxError>;

/// sled page cache used by Memstrata by default and by the raw sled baseline.
pub const SLED_CACHE_BYTES: u64 = 32 * 1024 * 1024;
/// `Durability::Periodic` window used by Memstrata and the raw sled `flush_every_ms`.
pub const FLUSH_EVERY_MS: u64 = 500;
/// tantivy writer budget used by Memstrata by default and by the raw tantivy baseline.
pub const TANTIVY_WRITER_BYTES: usize = 16_000_000;

/// One short-term item as each engine receives it: the JSON a caller holds,
/// and the exact record bytes Memstrata writes to sled for it.
#[derive(Debug, Clone)]
pub struct KvItem {
    /// Key.
    pub key: String,
    /// The caller's JSON value.
    pub value: Value,
    /// Memstrata's encoded record for `value` (see [`memstrata_engine::short_term_record_bytes`]).
    pub bytes: Vec<u8>,
}

/// A key/value store for the short-term floor.
pub trait KvEngine {
    /// Label in tables.
    fn name(&self) -> &'static str;
    /// Store one item (insert or replace).
    fn store(&self, item: KvItem) -> Result<()>;
    /// Read one item back (the value as the engine's user receives it); `true` if present.
    fn retrieve(&self, key: &str) -> Result<bool>;
    /// Make everything durable.
    fn flush(&self) -> Result<()>;
}

/// A full-text episode store.
pub trait SearchEngine {
    /// Label in tables.
    fn name(&self) -> &'static str;
    /// Add a batch of episodes through the engine's normal per-item write
    /// path, recording each add's latency into `lat` (the harness times the
    /// whole ingest, preparation included).
    fn ingest(&mut self, batch: &[EpisodeDoc], lat: &mut Latency) -> Result<()>;
    /// End of ingest: make everything durable and searchable.
    fn finish(&mut self) -> Result<()>;
    /// Top `limit` hits for natural-language text, each hit's document decoded;
    /// returns the corpus positions of the hits.
    fn search(&self, query: &str, limit: usize) -> Result<Vec<usize>>;
    /// Number of index segments (tantivy engines), for the record.
    fn segments(&self) -> Option<usize> {
        None
    }
    /// Engine-assigned ids to corpus positions, when the engine assigns its own ids.
    fn take_ids(&mut self) -> Option<std::collections::HashMap<String, usize>> {
        None
    }
}

/// Corpus position from a baseline id `ep-0000123`.
pub fn idx_from_id(id: &str) -> Option<usize> {
    id.strip_prefix("ep-")?.parse().ok()
}

/// Words of a natural-language query: maximal runs of alphanumerics, lowercased.
pub fn query_words(q: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for w in q.split(|c: char| !c.is_alphanumeric()) {
        if w.is_empty() {
            continue;
        }
        let w = w.to_lowercase();
        if !out.contains(&w) {
            out.push(w);
        }
    }
    out
}

/// Bytes of a store on disk: (apparent, allocated).
pub fn store_size(path: &Path) -> (u64, u64) {
    crate::sys::disk_usage(path)
}
