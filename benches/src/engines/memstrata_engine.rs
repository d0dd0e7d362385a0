//! Memstrata through its public API, as an application calls it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use chrono::{DateTime, Utc};
use memstrata::{Durability, Memory, NewEpisode, SearchFilters};
use serde::Serialize;
use serde_json::Value;

use super::{FLUSH_EVERY_MS, KvEngine, KvItem, Result, SearchEngine};
use crate::corpus::EpisodeDoc;
use crate::stats::Latency;

/// Open a store the way the benches do: `Durability::Periodic(500)`, default budgets.
///
/// `BENCH_EXPERIMENT_COMMIT_MS` overrides the index commit interval, for
/// experiments only (`scripts/bench.sh` never sets it).
pub fn open(path: &Path) -> Result<Memory> {
    let mut b = Memory::builder()
        .path(path)
        .durability(Durability::Periodic(FLUSH_EVERY_MS));
    if let Some(ms) = std::env::var("BENCH_EXPERIMENT_COMMIT_MS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        b = b.index_commit_interval(std::time::Duration::from_millis(ms));
    }
    Ok(b.open()?)
}

#[derive(Serialize)]
struct StRecord<'a> {
    value: &'a Value,
    stored_at: i64,
    expires_at: Option<i64>,
}

/// The record bytes Memstrata's short-term layer writes to sled for `value`
/// (docs/format.md: tag byte, MessagePack with named fields, lz4 above 512 bytes).
/// A test checks this against a real store.
pub fn short_term_record_bytes(value: &Value, stored_at_ms: i64) -> Vec<u8> {
    let raw = rmp_serde::to_vec_named(&StRecord {
        value,
        stored_at: stored_at_ms,
        expires_at: None,
    })
    .expect("encodable");
    let mut out = Vec::with_capacity(raw.len() + 1);
    if raw.len() > 512 {
        out.push(1);
        out.extend_from_slice(&lz4_flex::compress_prepend_size(&raw));
    } else {
        out.push(0);
        out.extend_from_slice(&raw);
    }
    out
}

/// A short-term record read back from its bytes (what [`short_term_record_bytes`] writes).
#[derive(Debug, serde::Deserialize)]
pub struct ShortTermRecord {
    /// The stored value.
    pub value: Value,
    /// When it was stored, ms since the epoch.
    pub stored_at: i64,
    /// When it expires, ms since the epoch, if ever.
    pub expires_at: Option<i64>,
}

/// Decode short-term record bytes as a hand-written store would have to: the tag
/// byte, lz4 when it is 1, then MessagePack with named fields.
pub fn decode_short_term_record(bytes: &[u8]) -> Result<ShortTermRecord> {
    let raw;
    let body: &[u8] = if bytes[0] == 1 {
        raw = lz4_flex::decompress_size_prepended(&bytes[1..])?;
        &raw
    } else {
        &bytes[1..]
    };
    Ok(rmp_serde::from_slice(body)?)
}

/// Short-term layer (`default` context).
#[derive(Debug)]
pub struct MemstrataKv {
    mem: Memory,
    st: memstrata::ShortTerm,
}

impl MemstrataKv {
    /// Open at `path`.
    pub fn open(path: &Path) -> Result<Self> {
        let mem = open(path)?;
        let st = mem.short_term();
        Ok(MemstrataKv { mem, st })
    }
}

impl KvEngine for MemstrataKv {
    fn name(&self) -> &'static str {
        "memstrata short_term"
    }
    fn store(&self, item: KvItem) -> Result<()> {
        self.st.store(&item.key, item.value, None)?;
        Ok(())
    }
    fn retrieve(&self, key: &str) -> Result<bool> {
        Ok(self.st.retrieve(key)?.is_some())
    }
    fn flush(&self) -> Result<()> {
        Ok(self.mem.flush()?)
    }
}

/// Episodic layer (`default` context).
#[derive(Debug)]
pub struct MemstrataSearch {
    path: PathBuf,
    mem: Memory,
    ep: memstrata::Episodic,
    /// Memstrata ids (UUIDv7, assigned by `record`) to corpus positions.
    ids: HashMap<String, usize>,
    filters: SearchFilters,
}

impl MemstrataSearch {
    /// Open (or create) at `path`; `ids` maps ids of an existing store back to the corpus.
    pub fn open(path: &Path, ids: HashMap<String, usize>) -> Result<Self> {
        let mem = open(path)?;
        let ep = mem.episodic();
        Ok(MemstrataSearch {
            path: path.to_owned(),
            mem,
            ep,
            ids,
            filters: SearchFilters::default(),
        })
    }

    /// Close and hand back the id map (to reopen later).
    pub fn close(self) -> HashMap<String, usize> {
        self.ids
    }

    /// The handle.
    pub fn memory(&self) -> &Memory {
        &self.mem
    }
}

/// The episode Memstrata records for a corpus document (every field, no embedding).
pub fn to_new_episode(d: &EpisodeDoc) -> NewEpisode {
    NewEpisode {
        summary: d.summary.clone(),
        content: d.content.clone(),
        participants: d.participants.clone(),
        tags: d.tags.clone(),
        importance: Some(d.importance),
        timestamp: DateTime::<Utc>::from_timestamp_millis(d.ts_ms),
        embedding: None,
        on_duplicate: None,
    }
}

impl SearchEngine for MemstrataSearch {
    fn name(&self) -> &'static str {
        "memstrata"
    }
    fn ingest(&mut self, batch: &[EpisodeDoc], lat: &mut Latency) -> Result<()> {
        let prepared: Vec<(usize, NewEpisode)> =
            batch.iter().map(|d| (d.idx, to_new_episode(d))).collect();
        for (idx, ne) in prepared {
            let t = Instant::now();
            let id = self.ep.record(ne)?;
            lat.record(t.elapsed());
            self.ids.insert(id, idx);
        }
        Ok(())
    }
    fn finish(&mut self) -> Result<()> {
        Ok(self.mem.flush()?)
    }
    fn search(&self, query: &str, limit: usize) -> Result<Vec<usize>> {
        let hits = self.ep.search(query, &self.filters, limit)?;
        Ok(hits
            .iter()
            .filter_map(|h| self.ids.get(&h.episode.id).copied())
            .collect())
    }
    fn segments(&self) -> Option<usize> {
        count_segments(&self.path.join("index"))
    }
    fn take_ids(&mut self) -> Option<HashMap<String, usize>> {
        Some(std::mem::take(&mut self.ids))
    }
}

/// Segments listed in a tantivy `meta.json`.
pub fn count_segments(index_dir: &Path) -> Option<usize> {
    let meta: Value =
        serde_json::from_slice(&std::fs::read(index_dir.join("meta.json")).ok()?).ok()?;
    Some(meta.get("segments")?.as_array()?.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The raw sled floor writes exactly the bytes Memstrata writes, and reads them back.
    #[test]
    fn record_bytes_match_a_real_store() {
        let dir = tempfile::tempdir().unwrap();
        let small = serde_json::json!({"text": "hello world", "step": 3});
        let large = serde_json::json!({"text": "word ".repeat(300)});
        {
            let mem = open(dir.path()).unwrap();
            mem.short_term().store("a", small.clone(), None).unwrap();
            mem.short_term().store("b", large.clone(), None).unwrap();
        }
        let db = sled::open(dir.path().join("db")).unwrap();
        let tree = db.open_tree("short_term").unwrap();
        for (k, v) in [("a", &small), ("b", &large)] {
            let stored = tree.get(format!("default\0{k}")).unwrap().unwrap();
            let r = decode_short_term_record(&stored).unwrap();
            assert_eq!(&r.value, v, "key {k}");
            assert_eq!(r.expires_at, None, "key {k}");
            assert_eq!(
                &*stored,
                short_term_record_bytes(v, r.stored_at).as_slice(),
                "key {k}"
            );
        }
    }
}
