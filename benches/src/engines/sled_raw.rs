//! Raw sled: the floor under the short-term layer. Same sled version, same
//! config (cache, flush interval), same tree name, same key and value bytes.

use std::path::Path;

use super::memstrata_engine::decode_short_term_record;
use super::{FLUSH_EVERY_MS, KvEngine, KvItem, Result, SLED_CACHE_BYTES};

/// Raw sled `insert` / `get`.
#[derive(Debug, Clone)]
pub struct RawSled {
    db: sled::Db,
    tree: sled::Tree,
}

impl RawSled {
    /// Open at `path` with Memstrata's sled settings.
    pub fn open(path: &Path) -> Result<Self> {
        let db = sled::Config::new()
            .path(path.join("db"))
            .cache_capacity(SLED_CACHE_BYTES)
            .flush_every_ms(Some(FLUSH_EVERY_MS))
            .open()?;
        let tree = db.open_tree("short_term")?;
        Ok(RawSled { db, tree })
    }
}

/// Memstrata's key for `key` in the default context.
pub fn ctx_key(key: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(8 + key.len());
    k.extend_from_slice(b"default\0");
    k.extend_from_slice(key.as_bytes());
    k
}

impl KvEngine for RawSled {
    fn name(&self) -> &'static str {
        "raw sled"
    }
    fn store(&self, item: KvItem) -> Result<()> {
        self.tree.insert(ctx_key(&item.key), item.bytes)?;
        Ok(())
    }
    fn retrieve(&self, key: &str) -> Result<bool> {
        Ok(self.tree.get(ctx_key(key))?.is_some())
    }
    fn flush(&self) -> Result<()> {
        self.db.flush()?;
        Ok(())
    }
}

/// Raw sled plus the decoding a hand-written store would do to hand back a
/// JSON value (MessagePack → `serde_json::Value`): an informative middle line.
#[derive(Debug)]
pub struct RawSledDecoded(pub RawSled);

impl KvEngine for RawSledDecoded {
    fn name(&self) -> &'static str {
        "raw sled + decode"
    }
    fn store(&self, item: KvItem) -> Result<()> {
        self.0.store(item)
    }
    fn retrieve(&self, key: &str) -> Result<bool> {
        match self.0.tree.get(ctx_key(key))? {
            Some(v) => {
                let r = decode_short_term_record(&v)?;
                std::hint::black_box(&r.value);
                Ok(true)
            }
            None => Ok(false),
        }
    }
    fn flush(&self) -> Result<()> {
        self.0.flush()
    }
}
