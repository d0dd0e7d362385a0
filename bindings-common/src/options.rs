//! Option records: the trailing, all-optional arguments of a call, as one
//! record per call (a JS options object, a Swift/Kotlin struct with defaults),
//! and their conversion to the core's arguments with the defaults of
//! [`crate::defaults`] applied.
//!
//! Python keeps its keyword arguments and builds these records from them.

use std::path::PathBuf;

use memstrata::{
    Durability, Fusion, FusionMethod, Limits, Memory, MemoryBuilder, NewEpisode, SearchFilters,
    VectorQuery, episodic::OnDuplicate, timesheet::TaskFilter,
};

use crate::defaults;
use crate::error::BindingError;
use crate::types::{Embedding, JsonValue, KeyBytes, Timestamp};

/// Declares option records: every field optional, defaulting to null/None.
macro_rules! options {
    ($(
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$fmeta:meta])* pub $field:ident : Option<$ty:ty> ),* $(,)?
        }
    )*) => {$(
        $(#[$meta])*
        #[derive(Debug, Clone, Default, PartialEq)]
        #[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
        #[cfg_attr(feature = "napi", napi_derive::napi(object))]
        pub struct $name {
            $(
                $(#[$fmeta])*
                #[cfg_attr(feature = "uniffi", uniffi(default = None))]
                pub $field: Option<$ty>,
            )*
        }
    )*};
}

options! {
    /// How to open a store (`Memory(path, ...)`).
    pub struct OpenOptions {
        /// `"periodic"` (default), `"immediate"` or `"manual"`.
        pub durability: Option<String>,
        /// sled page-cache size in bytes.
        pub cache_bytes: Option<i64>,
        /// Focus items kept in working memory (default 7).
        pub focus_capacity: Option<u32>,
        /// Workspace items kept in working memory (default 64).
        pub workspace_capacity: Option<u32>,
        /// Session versions kept by `optimize` (medium and up).
        pub session_retention: Option<u32>,
        /// Directories `punch_out(detect_files)` scans.
        pub workspace_roots: Option<Vec<String>>,
        /// Memory of the index writer in bytes.
        pub index_writer_bytes: Option<i64>,
        /// Versions kept per knowledge entry.
        pub semantic_history: Option<u32>,
        /// Most steps a procedure run may execute.
        pub max_steps: Option<u32>,
        /// Encryption-at-rest key: exactly 32 bytes (see docs/security.md). A store
        /// created with a key needs the same key on every open.
        #[cfg_attr(feature = "napi", napi(ts_type = "Buffer"))]
        pub encryption_key: Option<KeyBytes>,
        /// The low-memory preset (phones): sled cache 1 MiB, index writer 15 MB, episode
        /// cache 1 MiB, short-term cache 2 MiB, index cache 4 MiB, free heap given back
        /// every 250 ms, at most 2 malloc arenas in the process (glibc), index merges of at
        /// most 200,000 documents. Budgets given beside it override it.
        pub low_memory: Option<bool>,
        /// Budget of the decoded-episode cache in bytes (default 8 MiB; 0 turns it off; at most 1 GiB).
        pub episode_cache_bytes: Option<i64>,
        /// Budget of the short-term read cache in bytes (default 16 MiB; 0 turns it off; at most 1 GiB).
        pub short_term_cache_bytes: Option<i64>,
        /// Budget of the decrypted search-index cache of an encrypted store in bytes
        /// (default 16 MiB; 0 decrypts every read; at most 1 GiB).
        pub index_cache_bytes: Option<i64>,
        /// Seconds between returns of free heap to the OS while the store is written
        /// (default 1; 0 turns it off).
        pub release_memory_interval: Option<f64>,
    }

    /// Optional fields of `episodic.record`.
    pub struct RecordOptions {
        /// Arbitrary JSON content (default null).
        pub content: Option<JsonValue>,
        /// Who took part.
        pub participants: Option<Vec<String>>,
        /// Tags.
        pub tags: Option<Vec<String>>,
        /// Importance 1..=10 (default 5).
        pub importance: Option<u32>,
        /// When it happened (default now).
        pub timestamp: Option<Timestamp>,
        /// The host's embedding (1..=4096 finite numbers; dimension fixed per context).
        pub embedding: Option<Embedding>,
        /// What to do when an earlier episode duplicates this one: `"keep"`, `"skip"`,
        /// `"merge"` or `"link"` (default: the context's policy, `"keep"` unless set).
        #[cfg_attr(feature = "napi", napi(ts_type = "'keep' | 'skip' | 'merge' | 'link'"))]
        pub on_duplicate: Option<String>,
    }

    /// Optional arguments of `episodic.search`.
    pub struct SearchOptions {
        /// Most hits (default 10).
        pub limit: Option<u32>,
        /// Only episodes carrying every one of these tags.
        pub tags: Option<Vec<String>>,
        /// Only episodes with any of these participants.
        pub participants: Option<Vec<String>>,
        /// Only episodes at or after this instant.
        pub since: Option<Timestamp>,
        /// Only episodes at or before this instant.
        pub until: Option<Timestamp>,
        /// Only episodes at least this important (1..=10).
        pub min_importance: Option<u32>,
        /// Query embedding: fused with BM25, or pure vector search with an empty query.
        pub embedding: Option<Embedding>,
        /// `"adaptive"` (default), `"linear"` or `"rrf"`.
        #[cfg_attr(feature = "napi", napi(ts_type = "'adaptive' | 'linear' | 'rrf'"))]
        pub fusion: Option<String>,
        /// Weight of the BM25 list (default 0.5).
        pub bm25_weight: Option<f64>,
        /// Weight of the vector list (default 0.5).
        pub vector_weight: Option<f64>,
        /// RRF constant k (default 60).
        pub rrf_k: Option<f64>,
        /// Only episodes recorded by this instant (what the context held then).
        pub as_of: Option<Timestamp>,
        /// Add importance and recency to the scores (off by default): score × (1 + 0.5·(importance − 1)/9 + 0.5·0.5^(age_days/30)); docs/memory-hygiene.md.
        pub rank_by_utility: Option<bool>,
    }

    /// Optional arguments of `semantic.store`.
    pub struct StoreOptions {
        /// The host's embedding of the entry (without it, the registered embedder's, if any).
        pub embedding: Option<Embedding>,
        /// What to do when another entry (or this key's current value) duplicates the
        /// value: `"keep"`, `"skip"`, `"merge"` or `"link"` (default: the context's policy).
        #[cfg_attr(feature = "napi", napi(ts_type = "'keep' | 'skip' | 'merge' | 'link'"))]
        pub on_duplicate: Option<String>,
        /// When the new version starts to hold (default: now); the version it supersedes
        /// stays in history, closed at this instant.
        pub valid_from: Option<Timestamp>,
        /// When the new version stops holding (exclusive; default: open).
        pub valid_until: Option<Timestamp>,
    }

    /// Optional arguments of `semantic.update`.
    pub struct UpdateOptions {
        /// When the new version starts to hold (default: now); the version it supersedes
        /// stays in history, closed at this instant.
        pub valid_from: Option<Timestamp>,
        /// When the new version stops holding (exclusive; default: open).
        pub valid_until: Option<Timestamp>,
    }

    /// Optional arguments of `semantic.query`.
    pub struct QueryOptions {
        /// Most hits (default 10).
        pub limit: Option<u32>,
        /// Query embedding: fused with BM25, or pure vector search with an empty text.
        pub embedding: Option<Embedding>,
        /// `"adaptive"` (default), `"linear"` or `"rrf"`.
        #[cfg_attr(feature = "napi", napi(ts_type = "'adaptive' | 'linear' | 'rrf'"))]
        pub fusion: Option<String>,
        /// Weight of the BM25 list (default 0.5).
        pub bm25_weight: Option<f64>,
        /// Weight of the vector list (default 0.5).
        pub vector_weight: Option<f64>,
        /// RRF constant k (default 60).
        pub rrf_k: Option<f64>,
        /// Each entry as it held at this instant (entries with no version then are left out).
        pub as_of: Option<Timestamp>,
        /// Without `as_of`: also entries whose current version expired (default false).
        pub include_expired: Option<bool>,
    }

    /// Optional arguments of `tasks`.
    pub struct TaskFilterOptions {
        /// Only this model's tasks.
        pub llm_name: Option<String>,
        /// Only tasks of this Memstrata context (namespace).
        pub namespace: Option<String>,
        /// `"open"`, `"closed"` or `"all"` (default).
        pub status: Option<String>,
        /// Only tasks started at or after this instant.
        pub since: Option<Timestamp>,
        /// Only tasks started at or before this instant.
        pub until: Option<Timestamp>,
        /// Most tasks.
        pub limit: Option<u32>,
    }
}

fn size(field: &str, n: i64) -> Result<u64, BindingError> {
    u64::try_from(n)
        .map_err(|_| BindingError::invalid(field, format!("must be 0 or more, got {n}")))
}

/// An interval in seconds: finite and 0 or more (0 turns the periodic work off).
pub fn interval(field: &str, seconds: f64) -> Result<std::time::Duration, BindingError> {
    if seconds.is_nan() || seconds < 0.0 {
        return Err(BindingError::invalid(
            field,
            format!("must be a number of seconds, 0 or more, got {seconds}"),
        ));
    }
    std::time::Duration::try_from_secs_f64(seconds).map_err(|_| {
        BindingError::invalid(
            field,
            format!("must be a finite number of seconds, got {seconds}"),
        )
    })
}

fn importance(field: &str, n: u32) -> Result<u8, BindingError> {
    u8::try_from(n).map_err(|_| {
        BindingError::from(memstrata::Error::invalid(
            field,
            format!("must be in 1..=10, got {n}"),
        ))
    })
}

impl OpenOptions {
    /// A builder for these options on `path` (`None`: a temporary store).
    /// Bindings add what only they have (a clock) before `open()`.
    pub fn builder(&self, path: Option<PathBuf>) -> Result<MemoryBuilder, BindingError> {
        let durability: Durability = self
            .durability
            .as_deref()
            .unwrap_or(defaults::DEFAULT_DURABILITY)
            .parse()?;
        let mut limits = Limits::default();
        if let Some(n) = self.focus_capacity {
            limits.focus_capacity = n as usize;
        }
        if let Some(n) = self.workspace_capacity {
            limits.workspace_capacity = n as usize;
        }
        if let Some(n) = self.semantic_history {
            limits.semantic_history = n as usize;
        }
        if let Some(n) = self.max_steps {
            limits.max_steps = n as usize;
        }
        let mut b = Memory::builder().durability(durability).limits(limits);
        b = match path {
            Some(p) => b.path(p),
            None => b.temporary(),
        };
        // The preset first: every budget given beside it overrides it.
        if self.low_memory == Some(true) {
            b = b.low_memory();
        }
        if let Some(n) = self.episode_cache_bytes {
            let n = size("episode_cache_bytes", n)?;
            b = b.episode_cache_bytes(usize::try_from(n).unwrap_or(usize::MAX));
        }
        if let Some(n) = self.short_term_cache_bytes {
            let n = size("short_term_cache_bytes", n)?;
            b = b.short_term_cache_bytes(usize::try_from(n).unwrap_or(usize::MAX));
        }
        if let Some(n) = self.index_cache_bytes {
            let n = size("index_cache_bytes", n)?;
            b = b.index_cache_bytes(usize::try_from(n).unwrap_or(usize::MAX));
        }
        if let Some(s) = self.release_memory_interval {
            b = b.release_memory_interval(interval("release_memory_interval", s)?);
        }
        if let Some(n) = self.cache_bytes {
            b = b.cache_bytes(size("cache_bytes", n)?);
        }
        if let Some(n) = self.index_writer_bytes {
            let n = size("index_writer_bytes", n)?;
            b = b.index_writer_bytes(usize::try_from(n).unwrap_or(usize::MAX));
        }
        if let Some(n) = self.session_retention {
            b = b.session_retention(n as usize);
        }
        for root in self.workspace_roots.iter().flatten() {
            b = b.workspace_root(root);
        }
        if let Some(k) = &self.encryption_key {
            b = b.encryption_key(memstrata::EncryptionKey::from_slice(&k.0)?);
        }
        Ok(b)
    }

    /// Open the store at `path` (`None`: a temporary store) with these options.
    pub fn open(&self, path: Option<PathBuf>) -> Result<Memory, BindingError> {
        let b = self.builder(path)?;
        crate::error::guard(|| b.open())
    }
}

impl RecordOptions {
    /// The core's episode for `summary` with these options.
    pub fn episode(self, summary: String) -> Result<NewEpisode, BindingError> {
        let mut e = NewEpisode::new(summary).content(
            self.content
                .map_or(serde_json::Value::Null, JsonValue::into_inner),
        );
        e.participants = self.participants.unwrap_or_default();
        e.tags = self.tags.unwrap_or_default();
        if let Some(i) = self.importance {
            e = e.importance(importance("importance", i)?);
        }
        if let Some(t) = self.timestamp {
            e = e.timestamp(t.0);
        }
        if let Some(v) = self.embedding {
            e = e.embedding(embedding(&v.0)?);
        }
        if let Some(p) = on_duplicate(self.on_duplicate.as_deref())? {
            e = e.on_duplicate(p);
        }
        Ok(e)
    }
}

/// The core's duplicate policy from its name (`None`: the context's default).
pub fn on_duplicate(name: Option<&str>) -> Result<Option<OnDuplicate>, BindingError> {
    name.map(|s| OnDuplicate::parse("on_duplicate", s))
        .transpose()
        .map_err(BindingError::from)
}

/// An embedding from a foreign `f64` sequence (values must fit an `f32`).
pub fn embedding(v: &[f64]) -> Result<Vec<f32>, BindingError> {
    Ok(crate::types::embedding_from_f64("embedding", v)?)
}

/// The core's vector query from the binding's optional embedding and fusion fields.
pub fn vector_query(
    embedding_: Option<Vec<f64>>,
    fusion: Option<&str>,
    bm25_weight: Option<f64>,
    vector_weight: Option<f64>,
    rrf_k: Option<f64>,
) -> Result<VectorQuery, BindingError> {
    let mut f = Fusion::default();
    if let Some(m) = fusion {
        f.method = FusionMethod::parse("fusion", m)?;
    }
    if let Some(w) = bm25_weight {
        f.bm25_weight = w as f32;
    }
    if let Some(w) = vector_weight {
        f.vector_weight = w as f32;
    }
    if let Some(k) = rrf_k {
        f.rrf_k = k as f32;
    }
    Ok(VectorQuery {
        embedding: embedding_.as_deref().map(embedding).transpose()?,
        fusion: f,
    })
}

impl StoreOptions {
    /// The core's embedding argument of `store_with_embedding`.
    pub fn embedding(self) -> Result<Option<Vec<f32>>, BindingError> {
        self.embedding.map(|v| embedding(&v.0)).transpose()
    }

    /// The core's options of `store_with`.
    pub fn core(self) -> Result<memstrata::semantic::StoreOptions, BindingError> {
        let mut o = memstrata::semantic::StoreOptions::default();
        o.valid_from = self.valid_from.as_ref().map(|t| t.0);
        o.valid_until = self.valid_until.as_ref().map(|t| t.0);
        if let Some(p) = on_duplicate(self.on_duplicate.as_deref())? {
            o = o.on_duplicate(p);
        }
        if let Some(v) = self.embedding()? {
            o = o.embedding(v);
        }
        Ok(o)
    }
}

impl QueryOptions {
    /// The limit (default [`defaults::DEFAULT_SEARCH_LIMIT`]) and the vector query.
    pub fn query(self) -> Result<(usize, VectorQuery), BindingError> {
        let vq = vector_query(
            self.embedding.map(Vec::from),
            self.fusion.as_deref(),
            self.bm25_weight,
            self.vector_weight,
            self.rrf_k,
        )?;
        Ok((defaults::search_limit(self.limit), vq))
    }
}

impl SearchOptions {
    /// The core's filters, the limit (default [`defaults::DEFAULT_SEARCH_LIMIT`]) and the vector query.
    pub fn hybrid(mut self) -> Result<(SearchFilters, usize, VectorQuery), BindingError> {
        let vq = vector_query(
            self.embedding.take().map(Vec::from),
            self.fusion.as_deref(),
            self.bm25_weight,
            self.vector_weight,
            self.rrf_k,
        )?;
        let (f, limit) = self.filters()?;
        Ok((f, limit, vq))
    }

    /// The core's filters and the limit (default [`defaults::DEFAULT_SEARCH_LIMIT`]).
    pub fn filters(self) -> Result<(SearchFilters, usize), BindingError> {
        let filters = SearchFilters {
            tags: self.tags.unwrap_or_default(),
            participants: self.participants.unwrap_or_default(),
            since: self.since.map(|t| t.0),
            until: self.until.map(|t| t.0),
            min_importance: self
                .min_importance
                .map(|i| importance("min_importance", i))
                .transpose()?,
            as_of: self.as_of.map(|t| t.0),
            rank_by_utility: self.rank_by_utility.unwrap_or(false),
        };
        Ok((filters, defaults::search_limit(self.limit)))
    }
}

impl TaskFilterOptions {
    /// The core's task filter.
    pub fn filter(self) -> Result<TaskFilter, BindingError> {
        Ok(TaskFilter {
            llm_name: self.llm_name,
            namespace: self.namespace,
            status: match self.status.as_deref() {
                Some(s) => s.parse()?,
                None => Default::default(),
            },
            since: self.since.map(|t| t.0),
            until: self.until.map(|t| t.0),
            limit: self.limit.map(|n| n as usize),
        })
    }
}

/// A TTL in seconds (`> 0`, finite) as a duration; `None` stays `None`.
pub fn ttl(seconds: Option<f64>) -> Result<Option<std::time::Duration>, BindingError> {
    seconds
        .map(|s| memstrata::short_term::ttl_from_secs(s).map_err(BindingError::from))
        .transpose()
}

/// A retention policy from its limits (`max_age` in seconds); no limit
/// clears the policy. `InvalidInput` naming the field for a negative, zero or
/// non-finite limit.
pub fn retention(
    max_episodes: Option<i64>,
    max_bytes: Option<i64>,
    max_age: Option<f64>,
) -> Result<memstrata::retention::Retention, BindingError> {
    let mut r = memstrata::retention::Retention::new();
    let count = |field: &str, n: i64| {
        u64::try_from(n)
            .map_err(|_| BindingError::invalid(field, format!("must be at least 1, got {n}")))
    };
    if let Some(n) = max_episodes {
        r = r.max_episodes(count("max_episodes", n)?);
    }
    if let Some(n) = max_bytes {
        r = r.max_bytes(count("max_bytes", n)?);
    }
    if let Some(s) = max_age {
        r = r.max_age(interval("max_age", s)?);
    }
    r.validate()?;
    Ok(r)
}

/// `level` (`"light"` default, `"medium"`, `"aggressive"`).
pub fn optimize_level(
    level: Option<&str>,
) -> Result<memstrata::admin::OptimizeLevel, BindingError> {
    Ok(level.unwrap_or(defaults::DEFAULT_OPTIMIZE_LEVEL).parse()?)
}

/// `compression_level` (default [`defaults::DEFAULT_COMPRESSION_LEVEL`]), checked to fit.
pub fn compression_level(level: Option<u32>) -> Result<u8, BindingError> {
    match level {
        None => Ok(defaults::DEFAULT_COMPRESSION_LEVEL),
        Some(l) => u8::try_from(l).map_err(|_| {
            BindingError::invalid(
                "compression_level",
                format!(
                    "must be in 0..={}, got {l}",
                    memstrata::sessions::MAX_COMPRESSION_LEVEL
                ),
            )
        }),
    }
}

/// A version number from a foreign integer (must be ≥ 1... the core checks the range).
pub fn version(field: &str, v: Option<i64>) -> Result<Option<u64>, BindingError> {
    v.map(|v| size(field, v)).transpose()
}

#[cfg(test)]
mod tests;
