//! The four data layers: short-term, working, episodic, semantic. Each object
//! shares its `Memory`'s closable handle (closing the `Memory` closes them)
//! and follows its active context.

use std::sync::Arc;

use memstrata_bindings_common::{
    self as common, Episode, EpisodeHit, EpisodeItem, Handle, JsonValue, Knowledge, KnowledgeHit,
    KnowledgeItem, KnowledgeVersion, QueryOptions, RecordOptions, Recorded, SearchOptions,
    ShortTermEntry, StoreOptions, Timestamp, UpdateOptions, WorkspaceItem, defaults, items,
    options,
};

use crate::memory::json;
use crate::{MemstrataError, pool};

macro_rules! layer {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Debug, uniffi::Object)]
        pub struct $name {
            handle: Arc<Handle>,
        }

        impl $name {
            pub(crate) fn new(handle: Arc<Handle>) -> Self {
                $name { handle }
            }

            fn core(&self) -> Result<memstrata::Memory, MemstrataError> {
                Ok(self.handle.get()?)
            }
        }
    };
}

layer! {
    /// Short-term memory: key/value items with an optional TTL.
    ShortTerm
}
layer! {
    /// Working memory: a bounded focus list and workspace.
    Working
}
layer! {
    /// Episodic memory: events with full-text search.
    Episodic
}
layer! {
    /// Semantic memory: versioned knowledge by key, merge-patch updates, BM25 query.
    Semantic
}

#[uniffi::export]
impl ShortTerm {
    /// Store `value` (JSON text) under `key`, replacing any previous value;
    /// `ttl` (seconds, > 0) makes it expire.
    #[uniffi::method(default(ttl = None))]
    pub async fn store(
        &self,
        key: String,
        value: String,
        ttl: Option<f64>,
    ) -> Result<ShortTermEntry, MemstrataError> {
        let mem = self.core()?;
        pool::run(move || {
            let value = json("value", &value)?;
            let ttl = options::ttl(ttl)?;
            Ok(mem.short_term().store(&key, value, ttl)?.into())
        })
        .await
    }

    /// The value under `key` (JSON text), or null when absent or expired.
    pub async fn retrieve(&self, key: String) -> Result<Option<JsonValue>, MemstrataError> {
        let mem = self.core()?;
        pool::core(move || mem.short_term().retrieve(&key))
            .await
            .map(|v| v.map(JsonValue))
    }

    /// The item under `key` with its timestamps, or null.
    pub async fn entry(&self, key: String) -> Result<Option<ShortTermEntry>, MemstrataError> {
        let mem = self.core()?;
        pool::core(move || mem.short_term().entry(&key))
            .await
            .map(|e| e.map(Into::into))
    }

    /// Remove `key`; true if it was there.
    pub async fn forget(&self, key: String) -> Result<bool, MemstrataError> {
        let mem = self.core()?;
        pool::core(move || mem.short_term().forget(&key)).await
    }

    /// Live keys starting with `prefix`, sorted.
    #[uniffi::method(default(prefix = ""))]
    pub async fn keys(&self, prefix: String) -> Result<Vec<String>, MemstrataError> {
        let mem = self.core()?;
        pool::core(move || mem.short_term().keys(&prefix)).await
    }
}

#[uniffi::export]
impl Working {
    /// Put `item` at the front of the focus list (oldest evicted past capacity);
    /// true if it was not already in focus.
    pub async fn focus(&self, item: String) -> Result<bool, MemstrataError> {
        let mem = self.core()?;
        pool::core(move || mem.working().focus(&item)).await
    }

    /// The focus list, oldest first.
    pub async fn current_focus(&self) -> Result<Vec<String>, MemstrataError> {
        let mem = self.core()?;
        pool::core(move || mem.working().current_focus()).await
    }

    /// Add `value` (JSON text) to the workspace; returns its id.
    pub async fn add_to_workspace(&self, value: String) -> Result<String, MemstrataError> {
        let mem = self.core()?;
        pool::run(move || {
            let value = json("value", &value)?;
            Ok(mem.working().add_to_workspace(value)?)
        })
        .await
    }

    /// The workspace values (JSON text), oldest first.
    pub async fn workspace(&self) -> Result<Vec<JsonValue>, MemstrataError> {
        let mem = self.core()?;
        pool::core(move || mem.working().workspace())
            .await
            .map(|v| v.into_iter().map(JsonValue).collect())
    }

    /// The workspace items with their ids and times.
    pub async fn workspace_items(&self) -> Result<Vec<WorkspaceItem>, MemstrataError> {
        let mem = self.core()?;
        pool::core(move || mem.working().workspace_items())
            .await
            .map(common::list)
    }

    /// Empty the focus list and the workspace.
    pub async fn clear(&self) -> Result<(), MemstrataError> {
        let mem = self.core()?;
        pool::core(move || mem.working().clear()).await
    }
}

#[uniffi::export]
impl Episodic {
    /// Record an episode; returns its id. `options` carries the content (JSON
    /// text), participants, tags, importance (1..=10, default 5), timestamp and
    /// `embedding` (the dimension is fixed per context on first use; without
    /// one, the embedder of `Memory.setEmbedder`, if any, is called on the
    /// summary plus the content's text). `onDuplicate` ("keep", "skip", "merge"
    /// or "link"; default the context's policy) says what to do when an earlier
    /// episode duplicates this one; with "skip" or "merge" the existing id is returned.
    #[uniffi::method(default(options = None))]
    pub async fn record(
        &self,
        summary: String,
        options: Option<RecordOptions>,
    ) -> Result<String, MemstrataError> {
        let mem = self.core()?;
        pool::run(move || {
            let episode = options.unwrap_or_default().episode(summary)?;
            Ok(mem.episodic().record(episode)?)
        })
        .await
    }

    /// Record an episode like `record`, and say what its duplicate policy
    /// (`options.onDuplicate`: "keep", "skip", "merge" or "link"; default the
    /// context's) did: the id (the existing episode's when skipped or merged),
    /// `duplicateOf` and its `similarity` when a duplicate was found, `created`,
    /// and the policy applied.
    #[uniffi::method(default(options = None))]
    pub async fn record_detailed(
        &self,
        summary: String,
        options: Option<RecordOptions>,
    ) -> Result<Recorded, MemstrataError> {
        let mem = self.core()?;
        pool::run(move || {
            let episode = options.unwrap_or_default().episode(summary)?;
            Ok(mem.episodic().record_detailed(episode)?.into())
        })
        .await
    }

    /// Record many episodes in one call; returns their ids, in order. Each
    /// item takes the arguments of `record`. All or nothing: every item is
    /// checked first, with the checks and limits of `record`; a bad item
    /// throws with its field named `items[i].field` (e.g. `items[3].content`)
    /// and nothing is stored. One storage transaction and one index batch per
    /// call; at most 10,000 items and 64 MiB encoded per call.
    pub async fn record_many(
        &self,
        items: Vec<EpisodeItem>,
    ) -> Result<Vec<String>, MemstrataError> {
        let mem = self.core()?;
        pool::run(move || {
            let episodes = items::episodes(items)?;
            Ok(mem.episodic().record_many(episodes)?)
        })
        .await
    }

    /// The episode with `id`, or null.
    pub async fn get(&self, id: String) -> Result<Option<Episode>, MemstrataError> {
        let mem = self.core()?;
        pool::core(move || mem.episodic().get(&id))
            .await
            .map(|e| e.map(Into::into))
    }

    /// Full-text (BM25) search; an empty query lists by recency. `options`
    /// holds the limit (default 10), the tag, participant, time and
    /// importance filters, and the vector side: with `embedding` (or a
    /// registered embedder and a non-empty query) the BM25 and vector lists
    /// are fused by `fusion` ("adaptive", the default, "linear" or "rrf", with
    /// `bm25Weight`, `vectorWeight` and `rrfK`: docs/api.md, "Embeddings and
    /// hybrid search"); an embedding with an empty query is a pure vector search.
    /// Hits carry `bm25Rank` / `vectorRank` (null: not in that list).
    #[uniffi::method(default(query = "", options = None))]
    pub async fn search(
        &self,
        query: String,
        options: Option<SearchOptions>,
    ) -> Result<Vec<EpisodeHit>, MemstrataError> {
        let mem = self.core()?;
        pool::run(move || {
            let (filters, limit, vq) = options.unwrap_or_default().hybrid()?;
            Ok(common::list(
                mem.episodic().search_hybrid(&query, &filters, limit, &vq)?,
            ))
        })
        .await
    }

    /// The newest episodes (default 10); with `as_of`, of those recorded by then.
    #[uniffi::method(default(limit = None, as_of = None))]
    pub async fn recent(
        &self,
        limit: Option<u32>,
        as_of: Option<Timestamp>,
    ) -> Result<Vec<Episode>, MemstrataError> {
        let mem = self.core()?;
        pool::core(move || {
            mem.episodic()
                .recent_as_of(defaults::search_limit(limit), as_of.map(|t| t.0))
        })
        .await
        .map(common::list)
    }

    /// A text summary of the episodes with these ids.
    pub async fn summarize(&self, ids: Vec<String>) -> Result<String, MemstrataError> {
        let mem = self.core()?;
        pool::core(move || mem.episodic().summarize(&ids)).await
    }

    /// Remove an episode; true if it was there.
    pub async fn forget(&self, id: String) -> Result<bool, MemstrataError> {
        let mem = self.core()?;
        pool::core(move || mem.episodic().forget(&id)).await
    }
}

#[uniffi::export]
impl Semantic {
    /// Store `knowledge` (JSON text) under `key` (a new version). `options`:
    /// the entry's `embedding` (without one, the registered embedder's, if any,
    /// called on the key plus the knowledge's text).
    #[uniffi::method(default(options = None))]
    pub async fn store(
        &self,
        key: String,
        knowledge: String,
        options: Option<StoreOptions>,
    ) -> Result<Knowledge, MemstrataError> {
        let mem = self.core()?;
        pool::run(move || {
            let knowledge = json("knowledge", &knowledge)?;
            let opts = options.unwrap_or_default().core()?;
            Ok(mem.semantic().store_with(&key, knowledge, opts)?.into())
        })
        .await
    }

    /// Store (replace) many entries in one call; returns the new entries, in
    /// order (a key given twice ends with its last value). All or nothing:
    /// every item is checked first, with the checks and limits of `store`; a
    /// bad item throws with its field named `items[i].field` and nothing is
    /// stored. One storage transaction and one index batch per call.
    pub async fn store_many(
        &self,
        items: Vec<KnowledgeItem>,
    ) -> Result<Vec<Knowledge>, MemstrataError> {
        let mem = self.core()?;
        pool::run(move || {
            let list = items::knowledge(items)?;
            Ok(common::records::list(mem.semantic().store_many(list)?))
        })
        .await
    }

    /// The knowledge under `key` (JSON text), or null. With `as_of`: the value
    /// that held then (null when no kept version held).
    #[uniffi::method(default(as_of = None))]
    pub async fn retrieve(
        &self,
        key: String,
        as_of: Option<Timestamp>,
    ) -> Result<Option<JsonValue>, MemstrataError> {
        let mem = self.core()?;
        let read = common::as_of(as_of);
        pool::core(move || mem.semantic().get_with(&key, &read))
            .await
            .map(|v| v.map(|k| JsonValue(k.knowledge)))
    }

    /// The entry under `key` with its version, times and validity, or null.
    /// With `as_of`: its version that held then, from the kept history.
    #[uniffi::method(default(as_of = None))]
    pub async fn get(
        &self,
        key: String,
        as_of: Option<Timestamp>,
    ) -> Result<Option<Knowledge>, MemstrataError> {
        let mem = self.core()?;
        let read = common::as_of(as_of);
        pool::core(move || mem.semantic().get_with(&key, &read))
            .await
            .map(|k| k.map(Into::into))
    }

    /// BM25 query over keys and knowledge. `options`: the limit (default 10),
    /// and `embedding` with the fusion settings as in `Episodic.search` (an
    /// empty `text` with an embedding: pure vector search).
    #[uniffi::method(default(options = None))]
    pub async fn query(
        &self,
        text: String,
        options: Option<QueryOptions>,
    ) -> Result<Vec<KnowledgeHit>, MemstrataError> {
        let mem = self.core()?;
        pool::run(move || {
            let options = options.unwrap_or_default();
            let read = options.read();
            let (limit, vq) = options.query()?;
            Ok(common::list(
                mem.semantic().query_with(&text, limit, &vq, &read)?,
            ))
        })
        .await
    }

    /// Apply an RFC 7386 merge `patch` (JSON text) to the entry under `key`
    /// (`NotFound` if absent). `options`: the new version's `valid_from`
    /// (default now) and `valid_until`; the version it supersedes stays in
    /// history, closed at `valid_from`.
    #[uniffi::method(default(options = None))]
    pub async fn update(
        &self,
        key: String,
        patch: String,
        options: Option<UpdateOptions>,
    ) -> Result<Knowledge, MemstrataError> {
        let mem = self.core()?;
        pool::run(move || {
            let patch = json("patch", &patch)?;
            let opts = options.unwrap_or_default().core();
            Ok(mem.semantic().update_with(&key, patch, opts)?.into())
        })
        .await
    }

    /// Remove the entry under `key` and its history; true if it was there.
    pub async fn forget(&self, key: String) -> Result<bool, MemstrataError> {
        let mem = self.core()?;
        pool::core(move || mem.semantic().forget(&key)).await
    }

    /// The kept versions of `key`, oldest first.
    pub async fn history(&self, key: String) -> Result<Vec<KnowledgeVersion>, MemstrataError> {
        let mem = self.core()?;
        pool::core(move || mem.semantic().history(&key))
            .await
            .map(common::list)
    }

    /// Keys starting with `prefix`, sorted.
    #[uniffi::method(default(prefix = ""))]
    pub async fn keys(&self, prefix: String) -> Result<Vec<String>, MemstrataError> {
        let mem = self.core()?;
        pool::core(move || mem.semantic().keys(&prefix)).await
    }
}
